#include "cli/wiring.h"

#include "launcher/mpi/mpi_policy.h"
#include "launcher/policy/elastic_policy.h"
#include "launcher/policy/static_policy.h"

namespace etrun::cli {

std::unique_ptr<launcher::JobPolicy> MakePolicy(const JobConfig& config) {
  if (config.controller == Controller::kMpi) return std::make_unique<launcher::MpiPolicy>();
  if (config.elastic()) return std::make_unique<launcher::ElasticPolicy>();
  return std::make_unique<launcher::StaticPolicy>();
}

}  // namespace etrun::cli
