// DPL_CHECK: stops the process on a broken invariant (a bug, never bad input).
// Debian 12's Abseil has no absl/log, so this is our own small macro.
#pragma once

#include <cstdio>
#include <cstdlib>

#define DPL_CHECK(cond)                                                      \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "%s:%d: DPL_CHECK failed: %s\n", __FILE__,        \
                   __LINE__, #cond);                                         \
      std::abort();                                                          \
    }                                                                        \
  } while (0)

#define DPL_CHECK_OK(expr)                                                   \
  do {                                                                       \
    const auto& dpl_check_status_ = (expr);                                  \
    if (!dpl_check_status_.ok()) {                                           \
      std::fprintf(stderr, "%s:%d: DPL_CHECK_OK failed: %s\n", __FILE__,     \
                   __LINE__, std::string(dpl_check_status_.message()).c_str()); \
      std::abort();                                                          \
    }                                                                        \
  } while (0)
