// The log line format of dpledgerd (logfmt-like "ts=... level=... message"). Messages often
// carry caller-provided text (job ids, error messages quoting a request), so control
// characters in the message are escaped here, for every log line at once (issue 11): a job id
// holding "\n" cannot forge a log line, nor an ESC sequence rewrite a terminal.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "spdlog/formatter.h"

namespace dpledger::server {

// `text` with bytes below 0x20, 0x7f and backslash written as \n, \r, \t, \\ or \xNN.
std::string EscapeControl(std::string_view text);

// The formatter main.cc installs: "ts=<ISO 8601> level=<level> <escaped message>".
std::unique_ptr<spdlog::formatter> NewLogFormatter();

}  // namespace dpledger::server
