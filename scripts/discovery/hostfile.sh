#!/bin/sh
# Discovery script for etrun --host-discovery-script: prints the hosts listed in a hosts file, so
# an elastic job grows or shrinks when someone edits that file.
#
# Usage:    hostfile.sh [FILE]            FILE defaults to $ETRUN_HOSTFILE
# Input:    one host per line, in any of these forms ('#' starts a comment; blank lines, CRLF
#           line ends and surrounding blanks are fine):
#               node-a slots=4            (the --hostfile form; max_slots=N is accepted, ignored)
#               node-b:4                  (the -H / discovery-output form)
#               node-c                    (no count: etrun gives it --slots-per-host, else 1)
# Output:   one "host:slots" (or "host") line per host, in file order (the order decides ranks);
#           an empty file prints nothing, which etrun reads as "no hosts available yet".
# Errors:   one line on stderr and exit 1 when the file cannot be read or a line is malformed.
#           etrun then fails the job if it was the first run, and otherwise keeps the last good
#           host list, so a typo while editing never shrinks a running job.
# Example:
#   printf 'localhost slots=2\n' > hosts.txt
#   etrun -np 2 --min-np 1 --max-np 8 \
#       --host-discovery-script "scripts/discovery/hostfile.sh hosts.txt" python3 train.py
#   printf 'localhost slots=2\nnode-b slots=2\n' > hosts.txt.new && mv hosts.txt.new hosts.txt
# Replace the file with mv as above: etrun polls every second and could otherwise read a file
# that is only half written.
set -eu

me=hostfile.sh
file=${1:-${ETRUN_HOSTFILE:-}}
if [ -z "$file" ]; then
  echo "$me: no hosts file: pass its path as the first argument or set ETRUN_HOSTFILE" >&2
  exit 1
fi
if [ -d "$file" ] || [ ! -r "$file" ]; then
  echo "$me: cannot read hosts file $file: check the path (relative paths start from etrun's working directory)" >&2
  exit 1
fi

# awk reads the whole file before printing anything, so a bad line prints no hosts at all.
# shellcheck disable=SC2016  # the single quotes hold an awk program, not shell expansions
exec env LC_ALL=C awk -v me="$me" -v file="$file" '
function fail(msg) {
  printf "%s: %s line %d: %s\n", me, file, FNR, msg > "/dev/stderr"
  failed = 1
  exit 1
}
{
  line = $0
  sub(/#.*/, "", line)
  gsub(/\r/, "", line)
  gsub(/^[ \t]+|[ \t]+$/, "", line)
  if (line == "") next
  n = split(line, field, /[ \t]+/)
  host = field[1]
  slots = ""
  if (index(host, ":") > 0) {
    if (n > 1) fail("expected \"host:slots\" alone, got \"" line "\"")
    slots = substr(host, index(host, ":") + 1)
    host = substr(host, 1, index(host, ":") - 1)
    if (slots !~ /^[0-9]+$/) fail("slots must be a whole number, got \"" line "\"")
  }
  for (i = 2; i <= n; i++) {
    if (field[i] ~ /^slots=[0-9]+$/) {
      if (slots != "") fail("slots given twice in \"" line "\": keep one")
      slots = substr(field[i], 7)
    } else if (field[i] !~ /^max_slots=[0-9]+$/) {
      fail("expected \"host slots=N\", got \"" line "\"")
    }
  }
  if (host !~ /^[A-Za-z0-9._-]+$/) fail("bad host name \"" host "\": use letters, digits, \".\", \"_\", \"-\"")
  if (slots != "") { sub(/^0+/, "", slots); slots = ":" (slots == "" ? "0" : slots) }
  out[++count] = host slots
}
END {
  if (failed) exit 1
  for (i = 1; i <= count; i++) print out[i]
}' "$file"
