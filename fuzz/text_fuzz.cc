// Fuzz target: the scalar parsers that read durations, times, label selectors, ids, URLs and
// listen addresses from flags, query parameters and documents. The first byte picks the parser,
// the rest is its text. Every input must be refused with a Status or parsed; nothing may crash.
// A parsed value must survive its own formatting: what the program prints for a value (in a
// stored object, an answer, a CLI table) must read back as the same value.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/agent_config.h"
#include "alerts/alert_config.h"
#include "api/codec.h"
#include "api/notification_codec.h"
#include "cluster/fleet_file.h"
#include "common/check.h"
#include "common/time.h"
#include "common/utf8.h"
#include "compat/v1_model.h"
#include "daemon/config.h"
#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace egs;  // NOLINT(google-build-using-namespace): a fuzz entry point
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 13) {
    case 0: {
      auto d = api::ParseDuration(text);
      if (!d.ok()) break;
      // The REST API prints durations in Go form and reads them back.
      auto again = api::ParseDuration(common::FormatGoDuration(*d));
      EGS_CHECK(again.ok() && *again == *d);
      break;
    }
    case 1: {
      auto t = api::ParseTime(text);
      if (!t.ok()) break;
      // Stored objects hold times as FormatTime writes them.
      auto again = api::ParseTime(api::FormatTime(*t));
      EGS_CHECK(again.ok() && *again == *t);
      break;
    }
    case 2: {
      auto selector = api::ParseLabelSelector(text);
      if (selector.ok()) (void)selector->Matches({{"app", "x"}, {"prio", "5"}});
      break;
    }
    case 3: {
      auto d = compat::ParseV1Duration(text);
      if (!d.ok()) break;
      auto again = compat::ParseV1Duration(compat::FormatV1Duration(*d));
      EGS_CHECK(again.ok() && *again == *d);
      break;
    }
    case 4: {
      auto id = compat::ParseGprId(text);
      if (!id.ok()) break;
      auto again = compat::ParseGprId(compat::GprId(id->first, id->second));
      EGS_CHECK(again.ok() && *again == *id);
      break;
    }
    case 5:
      (void)cluster::ParseFleetDuration(text);
      break;
    case 6:
      (void)alerts::ParseDurationText(text);
      break;
    case 7:
      (void)agent::ParseAgentDuration(std::string(text));
      break;
    case 8:
      (void)api::ParseWebhookUrl(text, "spec.url");
      break;
    case 9: {
      daemon::DaemonConfig config;
      (void)daemon::ParseListen(std::string(text), "--listen", config);
      break;
    }
    case 10:
      (void)sim::UniformFleet(text);
      break;
    case 11: {
      (void)sim::OpenbQosPriority(text);
      (void)api::ParseInt64(text);
      break;
    }
    default: {
      // Where the first invalid byte is, and its line and column, for any text.
      if (auto bad = common::FindInvalidUtf8(text)) (void)common::LineColumnAt(text, *bad);
      break;
    }
  }
  return 0;
}
