#include "server/log_format.h"

#include "absl/strings/str_format.h"
#include "spdlog/pattern_formatter.h"

namespace dpledger::server {
namespace {

class EscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string escaped =
        EscapeControl(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedMessage>();
  }
};

}  // namespace

std::string EscapeControl(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      out += absl::StrFormat("\\x%02x", c);
    } else {
      out += ch;
    }
  }
  return out;
}

std::unique_ptr<spdlog::formatter> NewLogFormatter() {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  f->add_flag<EscapedMessage>('*').set_pattern("ts=%Y-%m-%dT%H:%M:%S.%e%z level=%l %*");
  return f;
}

}  // namespace dpledger::server
