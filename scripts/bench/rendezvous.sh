#!/usr/bin/env bash
# Rendezvous server load (spec §4.5-4.7), with etrun_rendezvous_bench
# (scripts/bench/rendezvous_load.cc).
#  1. wrk -t2 -c16 -d10s on GET /global/0 of etrun's server, against Horovod's own Python server
#     under the same wrk load: 2,094 req/s, measured here (spec/issue). Target: >= 20x.
#     The same load with "Connection: close" (one request per connection, as Horovod's workers
#     and the Python server do it) is printed for information.
#  2. A `global` scope rendezvous of N = 64, 256, 1,024 simulated Horovod workers, every request
#     on a new connection, with Gloo-sized values (136*(N-1) bytes: N-1 pair addresses of a
#     sockaddr_storage plus a sequence number; 136 bytes at N = 1,024), at once and with one worker
#     5 s late, on 1 server thread and on one per core (docs/rendezvous.md). Targets (issue 29):
#     N = 256 in <= 3 s; N = 256 with the straggler <= 2,550 not-found answers; N = 1,024 completes.
#  3. The floor of 2 (scripts/bench/rendezvous_floor.c): the same connections and bytes between bare
#     sockets, no server logic, blocking and event-driven: the least wall time and CPU a server
#     could reach here; then etrun's N = 256 run (all cores, at once) as a ratio to each, wall
#     time and server CPU. The event-driven floor's clients are shaped as the store's (N workers,
#     each sending Gloo's sequence of requests one at a time: --workers): the store's load.
# SCOPE_SIZES="256" runs only that N in 2 (the N = 1,024 runs take minutes each). FLOOR_ROUNDS=K
# adds 4: K interleaved rounds of the store at N = 256 and both floors, each round's ratios and
# their medians (about 45 s a round on 2 cores).
# Needs $BUILD/etrun_rendezvous_bench (BUILD defaults to build). If that target is missing but
# $BUILD/libetrun_core.a exists, the tool is compiled by hand into a temp dir against it.
# Exit status: 0 when every target passes and every run verified its data, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
PYTHON_SERVER_REQ_S=2094  # Horovod's http_server.py under the same wrk load; measured here, spec/issue
RATIO_TARGET=20
SCOPE_TARGET_S=3          # N = 256, Gloo-sized values, all cores (issue 29)
STRAGGLER_404_TARGET=2550  # N = 256, one worker 5 s late: <= 2 per waiting worker per second
source scripts/bench/server_temp.sh  # $out, $server_pid, and their cleanup at exit

bench=$BUILD/etrun_rendezvous_bench
if [[ ! -x $bench ]]; then
  if [[ ! -f $BUILD/libetrun_core.a ]]; then
    echo "rendezvous.sh: error: $bench not found; build it: cmake --build $BUILD --target etrun_rendezvous_bench" >&2
    exit 1
  fi
  echo "($bench not built; compiling scripts/bench/rendezvous_load.cc against $BUILD/libetrun_core.a)"
  bench=$out/etrun_rendezvous_bench
  g++ -std=c++20 -O2 -DNDEBUG -Wall -Wextra -Werror -I. -DBOOST_ASIO_NO_DEPRECATED \
    scripts/bench/rendezvous_load.cc "$BUILD/libetrun_core.a" -lspdlog -lfmt -lpthread -o "$bench"
fi
command -v wrk > /dev/null || { echo "rendezvous.sh: error: wrk not on PATH (apt-get install wrk)" >&2; exit 1; }

# Client, server and kernel share the two cores: anything else running skews every number here.
read -r load1 _ < /proc/loadavg
if awk -v l="$load1" 'BEGIN { exit !(l > 0.5) }'; then
  echo "note: load average ${load1} before the run; other processes on these cores make the numbers pessimistic"
fi

failed=0
verdict() {  # verdict <ok:0|1> <text>
  if [[ $1 == 1 ]]; then echo "PASS $2"; else echo "FAIL $2"; failed=1; fi
}

# --- 1. wrk ------------------------------------------------------------------------------------
"$bench" serve > "$out/serve.out" &
server_pid=$!
for _ in $(seq 100); do
  grep -q '^port ' "$out/serve.out" 2> /dev/null && break
  sleep 0.05
done
port=$(awk '/^port /{print $2}' "$out/serve.out")
[[ -n $port ]] || { echo "rendezvous.sh: error: the serve mode printed no port" >&2; exit 1; }
url=http://127.0.0.1:$port/global/0
wrk -t2 -c16 -d10s --latency "$url" > "$out/wrk.txt"
wrk -t2 -c16 -d10s --latency -H 'Connection: close' "$url" > "$out/wrk_close.txt"
kill -TERM "$server_pid"
serve_rc=0
wait "$server_pid" || serve_rc=$?
server_pid=

# Prints "req_s avg p50 p90 p99 max errors" from a wrk report.
wrk_summary() {
  awk '
    /Requests\/sec:/ { rps = $2 }
    /^    Latency/   { avg = $2; max = $4 }
    /^     50%/ { p50 = $2 } /^     90%/ { p90 = $2 } /^     99%/ { p99 = $2 }
    /Non-2xx or 3xx responses:/ { err += $NF }
    /Socket errors:/ { gsub(",", ""); err += $4 + $6 + $8 + $10 }
    END { printf "%s %s %s %s %s %s %d\n", rps, avg, p50, p90, p99, max, err }' "$1"
}
read -r rps avg p50 p90 p99 max errs < <(wrk_summary "$out/wrk.txt")
read -r c_rps c_avg c_p50 c_p90 c_p99 c_max c_errs < <(wrk_summary "$out/wrk_close.txt")
echo "== wrk -t2 -c16 -d10s GET /global/0 (100-byte value)"
printf '  %-26s %12s %9s %9s %9s %9s %9s %7s\n' "" "req/s" "avg" "p50" "p90" "p99" "max" "errors"
printf '  %-26s %12s %9s %9s %9s %9s %9s %7s\n' "etrun, keep-alive" "$rps" "$avg" "$p50" "$p90" "$p99" "$max" "$errs"
printf '  %-26s %12s %9s %9s %9s %9s %9s %7s\n' "etrun, Connection: close" "$c_rps" "$c_avg" "$c_p50" "$c_p90" "$c_p99" "$c_max" "$c_errs"
printf '  %-26s %12s   (measured here, spec/issue)\n' "horovod http_server.py" "$PYTHON_SERVER_REQ_S"
ratio=$(awk -v a="$rps" -v b="$PYTHON_SERVER_REQ_S" 'BEGIN { printf "%.1f", a / b }')
c_ratio=$(awk -v a="$c_rps" -v b="$PYTHON_SERVER_REQ_S" 'BEGIN { printf "%.1f", a / b }')
echo "  (for information: one request per connection is ${c_ratio}x the Python server)"
ok=$(awk -v a="$rps" -v b="$PYTHON_SERVER_REQ_S" -v t="$RATIO_TARGET" -v e="$errs" -v s="$serve_rc" \
  'BEGIN { print (a >= t * b && e == 0 && s == 0) ? 1 : 0 }')
verdict "$ok" "wrk: ${rps} req/s = ${ratio}x Horovod's Python server (target >= ${RATIO_TARGET}x = $((RATIO_TARGET * PYTHON_SERVER_REQ_S)) req/s, errors ${errs}, server exit ${serve_rc})"

# --- 2. scope rendezvous ---------------------------------------------------------------------------
# The store as etrun serves it: on its own threads (1, and one per core), GETs of missing keys held
# up to 1 s. N = 64 and 256 with Gloo-sized values (136*(N-1) bytes); N = 1,024 with 136-byte
# values (one pair address: Gloo-sized ones would move 136*N^3 = 146 GB); each at once and with one
# worker (rank N/2) 5 s late.
cores=$(nproc)
echo
echo "== global scope rendezvous, N simulated Horovod workers, new connection per request, poll 10 ms"
: > "$out/results"
for n in ${SCOPE_SIZES:-64 256 1024}; do  # e.g. SCOPE_SIZES=256: the floor's ratio in 2 minutes
  for late in 0 5000; do
    for threads in 1 "$cores"; do
      args=(scope "$n" --deadline-s 900 --server-threads "$threads" --straggler-ms "$late")
      [[ $n -lt 1024 ]] || args+=(--value-bytes 136)
      read -r load1 _ < /proc/loadavg
      if "$bench" "${args[@]}" > "$out/run.txt" 2> "$out/run.err"; then
        grep '^RESULT' "$out/run.txt" | sed "s/^RESULT/RESULT load=$load1/" >> "$out/results"
      else
        echo "RESULT load=$load1 n=$n server_threads=$threads straggler_ms=$late failed=1" >> "$out/results"
        sed 's/^/  /' "$out/run.err"
      fi
    done
  done
done
awk '
  function field(k,   i, kv) { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "" }
  BEGIN { printf "  %5s %7s %6s %8s %9s %7s %10s %8s %8s %9s %6s\n", "N", "value B", "late s", "threads",
          "requests", "404s", "received", "wall s", "CPU s", "CPU-s/GB", "load" }
  {
    if (field("failed") == 1) { printf "  %5s %7s %6s %8s  FAILED (see above)\n", field("n"), "", field("straggler_ms") / 1000, field("server_threads"); next }
    gb = field("bytes") / 1e9
    printf "  %5d %7d %6d %8d %9d %7d %7.1f MB %8.2f %8.2f %9.2f %6s\n", field("n"), field("value_bytes"),
      field("straggler_ms") / 1000, field("server_threads"), field("requests"), field("not_found"),
      field("bytes") / 1e6, field("deleted_s"), field("server_cpu_s"), field("server_cpu_s") / gb, field("load")
  }' "$out/results"
echo "  (requests floor 3N + N(N-1)/2 + 2N(N-1): Gloo's wait() polls a key once, then get() fetches it"
echo "   again, and rank r first reads rank_0..rank_<r-1>; received = headers + values; server CPU = the"
echo "   server threads' user + system time, which on loopback includes part of the client's TCP work)"

all_ok=$(awk '/failed=1/ { bad = 1 } END { print bad ? 0 : 1 }' "$out/results")
verdict "$all_ok" "every scope run finished, every value verified byte for byte, scope global cleared by the N DELETEs"
pick() {  # pick <n> <straggler_ms> <threads> <field>
  awk -v n="$1" -v l="$2" -v t="$3" -v f="$4" '
    { delete v; for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      if (v["n"] == n && v["straggler_ms"] == l && v["server_threads"] == t && v["failed"] != 1) print v[f] }' "$out/results"
}
s256=$(pick 256 0 "$cores" deleted_s)
ok=$(awk -v s="${s256:-}" -v t="$SCOPE_TARGET_S" 'BEGIN { print (s != "" && s <= t) ? 1 : 0 }')
verdict "$ok" "N=256 rendezvous, Gloo-sized values, $cores server threads: ${s256:-n/a} s (target <= ${SCOPE_TARGET_S} s)"
nf=$(pick 256 5000 "$cores" not_found)
ok=$(awk -v s="${nf:-}" -v t="$STRAGGLER_404_TARGET" 'BEGIN { print (s != "" && s <= t) ? 1 : 0 }')
verdict "$ok" "N=256, one worker 5 s late: ${nf:-n/a} not-found answers (target <= ${STRAGGLER_404_TARGET})"
if [[ " ${SCOPE_SIZES:-64 256 1024} " == *" 1024 "* ]]; then
  s1024=$(pick 1024 0 "$cores" deleted_s)
  verdict "$([[ -n $s1024 ]] && echo 1 || echo 0)" "N=1024 rendezvous (136-byte values) completes: ${s1024:-n/a} s"
fi

# --- 3. the floor ----------------------------------------------------------------------------------
# The same connections and bytes with no HTTP server, store or parsing (rendezvous_floor.c): what
# the kernel's loopback TCP costs this machine, the bound under every figure above. Two floors:
# the bare blocking server (a thread blocks in accept and read, closes first), and the bare
# event-driven one (an epoll loop per thread that waits for the client's close, as any server
# must that holds a thousand GETs open and keeps an HTTP/1.1 client's connection), under the
# store's load: N workers each sending Gloo's sequence of requests, as the store's bench does.
echo
echo "== the floor: the same connections and bytes, bare sockets, no server logic (rendezvous_floor.c)"
cc -O2 -pthread -o "$out/rendezvous_floor" scripts/bench/rendezvous_floor.c
for n in 64 256; do
  read -r load1 _ < /proc/loadavg
  "$out/rendezvous_floor" "$n" | head -1 > "$out/floor$n"
  echo "  $(cat "$out/floor$n") (load $load1)"
done
"$out/rendezvous_floor" 256 --event-driven --workers | head -1 > "$out/floor256e"
echo "  $(cat "$out/floor256e")"
# etrun's store against each floor, N = 256, Gloo-sized values, every core (issue 39's targets:
# wall <= 1.15x, server CPU <= 1.25x). The floors run minutes after the store's run, on the same
# machine: all are this run's.
cpu256=$(pick 256 0 "$cores" server_cpu_s)
for kind in "" e; do
  floor_wall=$(sed -n 's/.*wall \([0-9.]*\) s.*/\1/p' "$out/floor256$kind")
  floor_cpu=$(sed -n 's/.*server CPU \([0-9.]*\) s.*/\1/p' "$out/floor256$kind")
  name=$([[ -z $kind ]] && echo "the blocking floor" || echo "the event-driven floor")
  if [[ -n $floor_wall && -n $floor_cpu && -n ${s256:-} && -n $cpu256 ]]; then
    echo "  etrun's store at N=256 ($cores server threads) against $name:" \
      "wall $(awk -v a="$s256" -v b="$floor_wall" 'BEGIN { printf "%.2fx (%s s / %s s)", a / b, a, b }')," \
      "server CPU $(awk -v a="$cpu256" -v b="$floor_cpu" 'BEGIN { printf "%.2fx (%s s / %s s)", a / b, a, b }')"
  fi
done
echo "  (issue 39's targets: <= 1.15x and <= 1.25x; one run each spreads widely on a small VM, see"
echo "   docs/rendezvous.md; FLOOR_ROUNDS=6 for interleaved rounds and their medians; not verdicts)"

# --- 4. interleaved rounds (FLOOR_ROUNDS=K) ---------------------------------------------------------
# K rounds of: the store at N = 256 (every core, all workers at once), the blocking floor, the
# event-driven floor, one after another, so that the machine's drift touches all three alike; each
# round's ratios, then their medians (docs/rendezvous.md's tables).
rounds=${FLOOR_ROUNDS:-0}
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<< "$2"; }  # field NAME RESULT-LINE
if (( rounds > 0 )); then
  echo
  echo "== $rounds interleaved rounds, N=256: store, blocking floor, event-driven floor under the store's load (wall s, server CPU s)"
  : > "$out/rounds"
  for ((r = 1; r <= rounds; r++)); do
    store=$("$bench" scope 256 --deadline-s 900 --server-threads "$cores" | grep '^RESULT' || true)
    block=$("$out/rendezvous_floor" 256 | grep '^RESULT' || true)
    event=$("$out/rendezvous_floor" 256 --event-driven --workers | grep '^RESULT' || true)
    sw=$(field deleted_s "$store"); sc=$(field server_cpu_s "$store")
    su=$(field server_user_s "$store"); sr=$(field requests "$store")
    bw=$(field wall_s "$block"); bc=$(field server_cpu_s "$block")
    ew=$(field wall_s "$event"); ec=$(field server_cpu_s "$event")
    if [[ -z $sw || -z $sc || -z $su || -z $sr || -z $bw || -z $bc || -z $ew || -z $ec ]]; then
      echo "  round $r: a run failed (store: ${store:-none}; floors: ${block:-none} / ${event:-none})"
      failed=1
      continue
    fi
    echo "$r $sw $sc $bw $bc $ew $ec $su $sr" >> "$out/rounds"
  done
  awk '
    function median(a, n,   i, j, t) {
      for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    BEGIN { print "  | round | store | its user space, us a request | blocking floor | event-driven floor | / blocking: wall, CPU | / event-driven: wall, CPU |" }
    {
      n++; bw[n] = $2 / $4; bc[n] = $3 / $5; ew[n] = $2 / $6; ec[n] = $3 / $7; us[n] = $8 * 1e6 / $9
      printf "  | %d | %.2f, %.2f | %.1f | %.2f, %.2f | %.2f, %.2f | %.2f, %.2f | %.2f, %.2f |\n", $1, $2, $3, us[n], $4, $5, $6, $7, bw[n], bc[n], ew[n], ec[n]
    }
    END { if (n) printf "  | median | | %.1f | | | %.2f, %.2f | %.2f, %.2f |\n", median(us, n), median(bw, n), median(bc, n), median(ew, n), median(ec, n) }' "$out/rounds"
fi
exit "$failed"
