#include "server/ledger_chain.h"

#include <openssl/sha.h>

#include <bit>

#include "absl/strings/str_format.h"

namespace dpledger::chain {
namespace {

// Length-prefixed fields: injective, so distinct records never share an encoding.
class Encoder {
 public:
  explicit Encoder(std::string_view kind) { Text(kind); }
  Encoder& Text(std::string_view s) {
    absl::StrAppendFormat(&out_, "%d:", s.size());
    out_.append(s.data(), s.size());
    return *this;
  }
  Encoder& Int(int64_t v) { return Text(absl::StrFormat("%d", v)); }
  Encoder& Real(double v) {
    return Text(absl::StrFormat("%016x", std::bit_cast<uint64_t>(v)));
  }
  std::string Hash() const {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(out_.data()), out_.size(), digest);
    std::string hex;
    for (unsigned char c : digest) absl::StrAppendFormat(&hex, "%02x", c);
    return hex;
  }

 private:
  std::string out_;
};

}  // namespace

std::string Genesis(const JobFields& j) {
  return Encoder("dpledger-job-v1")
      .Text(j.tenant).Text(j.job_id).Real(j.budget_epsilon).Real(j.budget_delta)
      .Int(j.neighbouring).Text(j.accountant).Text(absl::StrFormat("%d", j.mc_seed))
      .Int(j.mc_num_samples).Int(j.schedule).Text(j.admission).Text(j.plan).Real(j.rdp_order)
      .Int(j.create_time_ms)
      .Hash();
}

std::string NextUpdate(std::string_view prev_head, const UpdateFields& u) {
  return Encoder("dpledger-update-v1")
      .Text(prev_head).Text(u.tenant).Text(u.job_id).Int(u.seq).Text(u.steps).Real(u.lower)
      .Real(u.estimate).Real(u.upper).Text(u.guarantee).Real(u.failure_probability)
      .Int(u.num_steps_after).Int(u.commit_time_ms)
      .Hash();
}

std::string NextRelease(std::string_view prev_release, std::string_view update_head,
                        const ReleaseFields& r) {
  return Encoder("dpledger-release-v1")
      .Text(prev_release).Text(update_head).Text(r.release_id).Text(r.request_id)
      .Real(r.epsilon).Real(r.delta).Text(r.verifier).Text(r.payload_sha256).Int(r.ledger_seq)
      .Int(r.num_steps).Int(r.create_time_ms)
      .Hash();
}

}  // namespace dpledger::chain
