#include "server/log_format.h"

#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {
namespace {

TEST(EscapeControlTest, EscapesControlCharactersAndBackslash) {
  EXPECT_EQ(EscapeControl("job-1.a_b"), "job-1.a_b");
  EXPECT_EQ(EscapeControl("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(EscapeControl(std::string("\x1b[2J\x7f\0", 6)), "\\x1b[2J\\x7f\\x00");
  EXPECT_EQ(EscapeControl("a\\nb"), "a\\\\nb");  // a literal backslash-n stays tellable apart
  EXPECT_EQ(EscapeControl("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 passes
}

// Issue 11: a job id with a newline forged a second log line.
TEST(LogFormatterTest, Issue11OneMessageIsOneLine) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("t", sink);
  logger.set_formatter(NewLogFormatter());
  logger.info("job={} created", "x\nts=2026-01-01 level=error forged");
  const std::string line = out.str();
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  EXPECT_NE(line.find("level=info job=x\\nts=2026-01-01 level=error forged created"),
            std::string::npos)
      << line;
  EXPECT_EQ(line.rfind("ts=", 0), 0u);
}

}  // namespace
}  // namespace dpledger::server
