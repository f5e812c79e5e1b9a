// Fuzz target: the YAML files an admin writes: the fleet file (egsd --fleet), egsd's config file
// (--config) and its alerts section. The first byte picks the reader, the rest is the file.
// Every input must be refused with a Status naming the place or accepted; nothing may crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "alerts/alert_config.h"
#include "cluster/fleet_file.h"
#include "daemon/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace egs;  // NOLINT(google-build-using-namespace): a fuzz entry point
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      (void)cluster::ParseFleetYaml(text, "fleet.yaml");
      break;
    case 1: {
      daemon::DaemonConfig config;
      (void)daemon::ApplyConfigYaml(std::string(text), "egsd.yaml", config);
      break;
    }
    default:
      (void)alerts::ParseAlertConfig(text);
      break;
  }
  return 0;
}
