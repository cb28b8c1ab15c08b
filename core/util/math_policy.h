// One Boost.Math policy for the whole project: report errors as NaN/inf through
// errno instead of throwing, so no exception leaves a function. Callers check
// the result with std::isfinite.
#pragma once

#include <boost/math/policies/policy.hpp>

namespace dpledger::core {

using NoThrowPolicy = boost::math::policies::policy<
    boost::math::policies::domain_error<boost::math::policies::errno_on_error>,
    boost::math::policies::pole_error<boost::math::policies::errno_on_error>,
    boost::math::policies::overflow_error<boost::math::policies::errno_on_error>,
    boost::math::policies::evaluation_error<boost::math::policies::errno_on_error>,
    boost::math::policies::rounding_error<boost::math::policies::errno_on_error>,
    boost::math::policies::promote_double<false>>;

}  // namespace dpledger::core
