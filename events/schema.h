// The events file's vocabulary (--events-file; docs/events.md, "Events file", lists each
// event's fields): every event name and field name, shared by the writers (launcher/) and the
// reader (report/), so a renamed field cannot drift between them. Pure.
#ifndef ETRUN_EVENTS_SCHEMA_H_
#define ETRUN_EVENTS_SCHEMA_H_

namespace etrun::events {

// "event" values.
inline constexpr char kJobStart[] = "job_start";
inline constexpr char kJobEnd[] = "job_end";
inline constexpr char kDiscovery[] = "discovery";
inline constexpr char kDiscoveryFailed[] = "discovery_failed";
inline constexpr char kHostBlacklisted[] = "host_blacklisted";
inline constexpr char kHostResurrected[] = "host_resurrected";
// A host whose agent is silent but that is still reachable: given --unresponsive-host-timeout.
inline constexpr char kHostLate[] = "host_late";
// The hang watchdog's verdict (--hang-timeout): reason ("no output for 300 s"), verdict (the
// line etrun printed), waiting_in (the most common place, "" when none), odd_ranks, odd_hosts,
// action (dump, abort, restart).
inline constexpr char kHang[] = "hang";
// A pre-flight's outcome (--preflight): hosts (their names), sick ([{host, why}]), seconds,
// median_mbit_s (of its streams; null when none ran), max_rtt_ms, action (start: none sick;
// refuse: a static job that did not start; warn: started on all; leave_out: an elastic job
// left the sick hosts out).
inline constexpr char kPreflight[] = "preflight";
inline constexpr char kRound[] = "round";
inline constexpr char kRankStarted[] = "rank_started";
inline constexpr char kRankExited[] = "rank_exited";
inline constexpr char kReset[] = "reset";
// The first worker of a running round left training (asked for a new rank, failed, or restart
// mode stopped the ranks): training stops here. Fields: round, reason.
inline constexpr char kResetBegin[] = "reset_begin";
// Every worker of the round's world is in (Horovod: the round's `global` rendezvous completed;
// restart mode: its ranks run): training goes on here. Fields: round, world_size.
inline constexpr char kWorldReady[] = "world_ready";

// The shared GPU pool's events (`etrun pool start --events-file`; a pool's file holds only these).
// pool_start: pool, hosts [{host, slots, devices}] (-H/--hostfile; empty with a discovery
// script), total. pool_hosts: hosts, total (the pool's slots: right after pool_start, and
// whenever discovery changes them). pool_job_joined: job, priority, min_np, max_np. pool_priority: job, priority.
// pool_job_left: job, reason ("ended", "crashed", "lost": no word from it for the lease).
// pool_allocation: total, held {job: slots}, target {job: slots}, queued [job]; written whenever
// one of them changes. `held` counts every slot a job has or is still giving back, so the held
// slots of all jobs never exceed total. pool_stop: (no fields).
inline constexpr char kPoolStart[] = "pool_start";
inline constexpr char kPoolHosts[] = "pool_hosts";
inline constexpr char kPoolJobJoined[] = "pool_job_joined";
inline constexpr char kPoolPriority[] = "pool_priority";
inline constexpr char kPoolJobLeft[] = "pool_job_left";
inline constexpr char kPoolAllocation[] = "pool_allocation";
inline constexpr char kPoolStop[] = "pool_stop";

// Field names. Every event: ts, t, event.
namespace field {
inline constexpr char kTs[] = "ts";                // UTC ISO 8601 with milliseconds
inline constexpr char kT[] = "t";                  // seconds since the job started
inline constexpr char kEvent[] = "event";
// job_start
inline constexpr char kJob[] = "job";
inline constexpr char kCommand[] = "command";
inline constexpr char kNp[] = "np";
inline constexpr char kMinNp[] = "min_np";
inline constexpr char kMaxNp[] = "max_np";
inline constexpr char kElastic[] = "elastic";
inline constexpr char kHosts[] = "hosts";          // also discovery: [{host, slots}]
inline constexpr char kSlots[] = "slots";
inline constexpr char kDiscoveryScript[] = "discovery_script";
inline constexpr char kPid[] = "pid";              // also rank_started, rank_exited
// job_end
inline constexpr char kExitCode[] = "exit_code";
inline constexpr char kCause[] = "cause";
// host_blacklisted, host_resurrected, rank_*
inline constexpr char kHost[] = "host";
inline constexpr char kReason[] = "reason";        // also discovery_failed, reset, rank_exited
inline constexpr char kCooldownS[] = "cooldown_s";
inline constexpr char kSilentS[] = "silent_s";      // host_late: seconds without a word
inline constexpr char kBoundS[] = "bound_s";        // host_late: --unresponsive-host-timeout
inline constexpr char kVerdict[] = "verdict";       // hang
inline constexpr char kWaitingIn[] = "waiting_in";  // hang
inline constexpr char kOddRanks[] = "odd_ranks";    // hang
inline constexpr char kOddHosts[] = "odd_hosts";    // hang
inline constexpr char kAction[] = "action";         // hang, preflight
inline constexpr char kSick[] = "sick";             // preflight
inline constexpr char kWhy[] = "why";               // preflight's sick entries
inline constexpr char kSeconds[] = "seconds";       // preflight
inline constexpr char kMedianMbitS[] = "median_mbit_s";  // preflight
inline constexpr char kMaxRttMs[] = "max_rtt_ms";   // preflight
// round
inline constexpr char kRound[] = "round";          // also rank_started
inline constexpr char kWorldSize[] = "world_size";
inline constexpr char kAssignment[] = "assignment";
// rank_started, rank_exited
inline constexpr char kRank[] = "rank";
inline constexpr char kLocalRank[] = "local_rank";
inline constexpr char kCode[] = "code";
inline constexpr char kSignal[] = "signal";
// reset
inline constexpr char kResets[] = "resets";
// pool_*
inline constexpr char kPool[] = "pool";
inline constexpr char kDevices[] = "devices";
inline constexpr char kTotal[] = "total";
inline constexpr char kPriority[] = "priority";
inline constexpr char kHeld[] = "held";
inline constexpr char kTarget[] = "target";
inline constexpr char kQueued[] = "queued";
// job_start of a --pool job: the pool's name and the job's id in it (its pool_* events' "job").
inline constexpr char kPoolJob[] = "pool_job";
}  // namespace field

// rank_exited "reason" values.
inline constexpr char kFinished[] = "finished";
inline constexpr char kFailed[] = "failed";
inline constexpr char kDrained[] = "drained";
inline constexpr char kStopped[] = "stopped";

// pool_job_left "reason" values.
inline constexpr char kEnded[] = "ended";
inline constexpr char kCrashed[] = "crashed";
inline constexpr char kLost[] = "lost";

}  // namespace etrun::events

#endif  // ETRUN_EVENTS_SCHEMA_H_
