// Early-return helpers for absl::Status / absl::StatusOr.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DPL_RETURN_IF_ERROR(expr)                  \
  do {                                             \
    ::absl::Status dpl_status_ = (expr);           \
    if (!dpl_status_.ok()) return dpl_status_;     \
  } while (0)

#define DPL_CONCAT_INNER_(a, b) a##b
#define DPL_CONCAT_(a, b) DPL_CONCAT_INNER_(a, b)

// DPL_ASSIGN_OR_RETURN(auto x, Foo()); declares x or returns Foo()'s error.
#define DPL_ASSIGN_OR_RETURN(lhs, expr) \
  DPL_ASSIGN_OR_RETURN_IMPL_(DPL_CONCAT_(dpl_statusor_, __LINE__), lhs, expr)
#define DPL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(*tmp)
