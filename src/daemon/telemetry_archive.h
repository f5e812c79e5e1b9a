// TelemetryArchive: the telemetry hub's downsampled history (1-minute buckets for 24 h,
// 10-minute buckets for 30 days) kept in the Store, so that it survives an egsd restart.
//
// Flush writes, in one Store::WriteSeries call, the buckets that changed since the previous
// flush (the open bucket of each tier is rewritten until it closes) and prunes what is older
// than each tier's retention; egsd calls it once a minute, so the write rate is bounded by one
// transaction a minute of (GPUs x 2) rows. Load reads everything back into the hub at start.
//
// Series (store/store.h SeriesRecord): "telemetry.1m" and "telemetry.10m" keyed "<node>/<gpu>"
// at the bucket start, data a JSON array [count, utilAvg, utilMax, memUsedAvg, memTotalMiB,
// powerAvg, powerMax, tempAvg, tempMax, smClockAvg, eccSbeTotal, eccDbeTotal, xidErrorsTotal,
// present] (present: the GpuSample::Field bits of the readings the bucket has; records of 13
// elements, from before it was kept, are read as having every reading);
// "telemetry.gpu" keyed the same at time 0, data {"uuid", "model"}.
//
// Thread-safety: not thread-safe; one thread (egsd's alert timer) calls Flush; Load runs before.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "common/status.h"
#include "common/time.h"
#include "store/store.h"
#include "telemetry/telemetry_hub.h"

namespace egs::daemon {

inline constexpr common::Duration kMinuteRetention = common::Hours(24);
inline constexpr common::Duration kTenMinuteRetention = common::Hours(24 * 30);

class TelemetryArchive {
 public:
  // Both must outlive the archive.
  TelemetryArchive(telemetry::TelemetryHub& hub, store::Store& store) : hub_(hub), store_(store) {}

  // Restores the stored history into the hub (call before ingest starts). Returns the number of
  // buckets restored.
  common::Result<std::size_t> Load(common::Time now);
  // Writes what changed since the last flush and prunes expired buckets. Returns the number of
  // records written. On error nothing is marked written: the next flush retries.
  common::Result<std::size_t> Flush(common::Time now);

 private:
  telemetry::TelemetryHub& hub_;
  store::Store& store_;
  std::optional<common::Time> last_flush_;
  std::set<std::string> known_;  // GPU keys whose labels are stored
};

}  // namespace egs::daemon
