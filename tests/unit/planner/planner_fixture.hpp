#pragma once

// The paper's case study loaded once per test binary: config, model and the three plans.

#include "prfaas/planner/config.hpp"
#include "prfaas/planner/planner.hpp"

#include <string>

namespace prfaas::planner::test {

inline std::string case_study_path() {
  return std::string(PRFAAS_SOURCE_DIR) + "/configs/paper-case-study.yaml";
}

struct case_study {
  planner_config cfg = load_config(case_study_path());
  throughput_model model{cfg.inputs};
  plan_report report = plan_all(model);
};

inline const case_study& paper() {
  static const case_study c;
  return c;
}

/// |got − want| ≤ rel·want.
inline bool within(double got, double want, double rel) {
  return got >= want * (1 - rel) && got <= want * (1 + rel);
}

} // namespace prfaas::planner::test
