#include "core/registry/accountant_registry.h"

#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

TEST(AccountantRegistry, CreatesEveryNamedAccountant) {
  for (std::string_view name : AccountantNames()) {
    auto a = CreateAccountant(name);
    ASSERT_TRUE(a.ok()) << name << ": " << a.status();
    EXPECT_EQ((*a)->Name(), name);
  }
}

TEST(AccountantRegistry, UnknownNameNamesTheField) {
  EXPECT_THAT(CreateAccountant("moments"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("accountant")));
}

TEST(AccountantRegistry, CloneKeepsTheLedgerAndIsIndependent) {
  for (std::string_view name : AccountantNames()) {
    auto a = CreateAccountant(name);
    ASSERT_TRUE(a.ok()) << name;
    ASSERT_TRUE((*a)->Compose(*Mechanism::Gaussian(2.0), 5).ok()) << name;
    auto copy = (*a)->Clone();
    ASSERT_TRUE(copy->Compose(*Mechanism::Gaussian(2.0), 5).ok());
    EXPECT_EQ((*a)->num_steps(), 5) << name;
    EXPECT_EQ(copy->num_steps(), 10) << name;
  }
}

}  // namespace
}  // namespace dpledger::core
