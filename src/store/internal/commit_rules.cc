#include "store/internal/commit_rules.h"

#include <fmt/format.h>

#include <algorithm>

namespace egs::store::internal {

std::string DescribeObject(std::string_view kind, std::string_view ns, std::string_view name) {
  if (ns.empty()) return fmt::format("{} {}", kind, name);
  return fmt::format("{} {}/{}", kind, ns, name);
}

common::Status ValidateCommit(const std::vector<WriteOp>& ops, const std::vector<LogRecord>& logs) {
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const StoredObject& o = ops[i].object;
    if (o.kind.empty() || o.name.empty()) {
      return common::InvalidArgumentError(fmt::format(
          "op {}: kind and name must be non-empty (kind \"{}\", name \"{}\")", i, o.kind, o.name));
    }
    if (ops[i].expected_version.has_value() && *ops[i].expected_version < 0) {
      return common::InvalidArgumentError(fmt::format("op {} ({}): negative expected_version {}", i,
                                                      DescribeObject(o.kind, o.ns, o.name),
                                                      *ops[i].expected_version));
    }
  }
  for (std::size_t i = 0; i < logs.size(); ++i) {
    if (logs[i].stream.empty()) {
      return common::InvalidArgumentError(fmt::format("log record {}: empty stream", i));
    }
  }
  return common::OkStatus();
}

common::Status CheckExpectedVersion(const WriteOp& op, std::optional<std::int64_t> actual) {
  if (!op.expected_version.has_value()) return common::OkStatus();
  const std::int64_t expected = *op.expected_version;
  const StoredObject& o = op.object;
  if (expected == 0) {
    if (!actual.has_value()) return common::OkStatus();
    return common::AlreadyExistsError(fmt::format("{} already exists (resource_version {})",
                                                  DescribeObject(o.kind, o.ns, o.name), *actual));
  }
  if (!actual.has_value()) {
    return common::NotFoundError(fmt::format("{} not found (expected resource_version {})",
                                             DescribeObject(o.kind, o.ns, o.name), expected));
  }
  if (*actual != expected) {
    return common::AbortedError(
        fmt::format("{} was modified: expected resource_version {}, actual {}",
                    DescribeObject(o.kind, o.ns, o.name), expected, *actual));
  }
  return common::OkStatus();
}

common::Status CompactedError(std::int64_t after_revision, std::int64_t compacted) {
  return common::AbortedError(fmt::format(
      "changes after revision {} were compacted (the feed starts after revision {}); list "
      "again and watch from the list's revision",
      after_revision, compacted));
}

common::Status ValidateSeries(const std::vector<SeriesRecord>& records,
                              const std::vector<SeriesPrune>& prunes) {
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i].series.empty()) {
      return common::InvalidArgumentError(fmt::format("WriteSeries: records[{}]: empty series", i));
    }
    if (records[i].key.empty()) {
      return common::InvalidArgumentError(fmt::format("WriteSeries: records[{}]: empty key", i));
    }
  }
  for (std::size_t i = 0; i < prunes.size(); ++i) {
    if (prunes[i].series.empty()) {
      return common::InvalidArgumentError(fmt::format("WriteSeries: prunes[{}]: empty series", i));
    }
  }
  return common::OkStatus();
}

bool SameCommit(const std::vector<WriteOp>& a_ops, const std::vector<LogRecord>& a_logs,
                const std::vector<WriteOp>& b_ops, const std::vector<LogRecord>& b_logs) {
  auto same_op = [](const WriteOp& a, const WriteOp& b) {
    const StoredObject& x = a.object;
    const StoredObject& y = b.object;
    return a.type == b.type && a.expected_version == b.expected_version && x.kind == y.kind &&
           x.ns == y.ns && x.name == y.name && x.uid == y.uid && x.created == y.created &&
           x.data == y.data;
  };
  auto same_log = [](const LogRecord& a, const LogRecord& b) {
    return a.stream == b.stream && a.at == b.at && a.data == b.data;
  };
  return std::equal(a_ops.begin(), a_ops.end(), b_ops.begin(), b_ops.end(), same_op) &&
         std::equal(a_logs.begin(), a_logs.end(), b_logs.begin(), b_logs.end(), same_log);
}

}  // namespace egs::store::internal
