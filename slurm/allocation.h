// A Slurm allocation as the job's environment describes it (inside sbatch/salloc): its nodes, in
// Slurm's order, and slots per node, by the same rules as scripts/discovery/slurm.sh. Pure: the
// environment is passed in, no scontrol is run (Slurm's host-list syntax is expanded here).
#ifndef ETRUN_SLURM_ALLOCATION_H_
#define ETRUN_SLURM_ALLOCATION_H_

#include <string>
#include <vector>

#include "discovery/host_slots.h"

namespace etrun::slurm {

// Expands a Slurm host list ("h[1-3,5]", "gpu-[01-02]x,login", "r[1-2]n[1-2]") into names, in
// order; zero-padded ranges keep their width. Returns false and sets *err naming the problem: a
// list that is not Slurm's syntax, or a name beginning with '-' (discovery::StartsLikeOption).
bool ExpandHostList(const std::string& list, std::vector<std::string>* hosts, std::string* err);

// Expands SLURM_TASKS_PER_NODE's form ("4(x2),2" -> 4, 4, 2). Returns false and sets *err.
bool ExpandTaskCounts(const std::string& spec, std::vector<int>* counts, std::string* err);

// The value of `name` in `env` ("K=V" strings); "" when unset.
std::string EnvValue(const std::vector<std::string>& env, const std::string& name);

// Whether `env` is inside an allocation: SLURM_JOB_ID and a node list are set.
bool InAllocation(const std::vector<std::string>& env);

// The allocation's nodes and slots. Slots per node, the first that is set: ETRUN_SLURM_SLOTS,
// SLURM_GPUS_ON_NODE, SLURM_GPUS_PER_NODE ("4", "a100:4", "a100:2,v100:2" -> 4),
// SLURM_NTASKS_PER_NODE, SLURM_TASKS_PER_NODE (per node), else 1. Returns false and sets *err
// (naming the variable and how to fix it) outside an allocation or on a malformed value.
bool AllocationHosts(const std::vector<std::string>& env, std::vector<discovery::HostSlots>* hosts,
                     std::string* err);

// Whether AllocationHosts' slots per node count the node's GPUs: SLURM_GPUS_ON_NODE or
// SLURM_GPUS_PER_NODE decided them (ETRUN_SLURM_SLOTS unset).
bool SlotsCountGpus(const std::vector<std::string>& env);

// The --remote-shell template that starts one rank on {host} of allocation `job_id`.
std::string SrunTemplate(const std::string& job_id);

}  // namespace etrun::slurm

#endif  // ETRUN_SLURM_ALLOCATION_H_
