#include "store/fake_store.h"

#include <algorithm>
#include <utility>

#include "store/internal/commit_rules.h"

namespace egs::store {

FakeStore::FakeStore(FakeStoreOptions options) : options_(options) {}

common::Result<CommitResult> FakeStore::Commit(std::vector<WriteOp> ops,
                                               std::vector<LogRecord> logs) {
  EGS_RETURN_IF_ERROR(internal::ValidateCommit(ops, logs));
  std::lock_guard lock(mu_);
  // Op i takes revision revision_ + 1 + i; a commit without ops takes one.
  const std::int64_t last_revision = internal::LastRevisionOf(revision_, ops.size());
  std::int64_t revision = revision_;

  // 1. Stage every op over the current state; nothing is touched until all preconditions hold.
  //    nullopt in `staged` means "deleted by this commit".
  std::map<Key, std::optional<StoredObject>> staged;
  std::vector<Change> changes;
  for (WriteOp& op : ops) {
    Key key{op.object.kind, op.object.ns, op.object.name};
    std::optional<StoredObject> current;
    if (auto s = staged.find(key); s != staged.end()) {
      current = s->second;
    } else if (auto o = objects_.find(key); o != objects_.end()) {
      current = o->second;
    }
    std::optional<std::int64_t> actual;
    if (current.has_value()) actual = current->resource_version;
    EGS_RETURN_IF_ERROR(internal::CheckExpectedVersion(op, actual));
    ++revision;
    if (op.type == WriteOp::Type::kPut) {
      op.object.resource_version = revision;
      std::optional<std::string> previous;
      if (current.has_value()) previous = current->data;
      changes.push_back(
          Change{revision, WriteOp::Type::kPut, op.object, true, std::move(previous)});
      staged[key] = std::move(op.object);
    } else if (current.has_value()) {
      current->resource_version = revision;
      std::string previous = current->data;
      changes.push_back(
          Change{revision, WriteOp::Type::kDelete, std::move(*current), true, std::move(previous)});
      staged[key] = std::nullopt;
    }
  }

  // 2. Apply.
  for (auto& [key, object] : staged) {
    if (object.has_value()) {
      objects_.insert_or_assign(key, std::move(*object));
    } else {
      objects_.erase(key);
    }
  }
  for (LogRecord& record : logs) {
    record.seq = ++last_seq_;
    logs_.push_back(std::move(record));
  }
  for (Change& change : changes) changes_.push_back(std::move(change));
  revision_ = last_revision;

  // 3. Compact the change feed to the retention window.
  const std::int64_t compact_to = revision_ - options_.change_retention_revisions;
  if (compact_to > compacted_revision_) {
    auto keep = std::find_if(changes_.begin(), changes_.end(),
                             [&](const Change& c) { return c.revision > compact_to; });
    changes_.erase(changes_.begin(), keep);
    compacted_revision_ = compact_to;
  }
  return CommitResult{last_revision};
}

common::Result<std::optional<StoredObject>> FakeStore::Get(std::string_view kind,
                                                           std::string_view ns,
                                                           std::string_view name) {
  std::lock_guard lock(mu_);
  auto it = objects_.find(std::make_tuple(kind, ns, name));
  if (it == objects_.end()) return std::optional<StoredObject>();
  return std::optional<StoredObject>(it->second);
}

common::Result<ListResult> FakeStore::List(std::string_view kind,
                                           std::optional<std::string_view> ns) {
  if (kind.empty()) return common::InvalidArgumentError("List: empty kind");
  std::lock_guard lock(mu_);
  ListResult result;
  result.revision = revision_;
  // The map is ordered by (kind, ns, name), so the kind's objects are one sorted run.
  for (auto it =
           objects_.lower_bound(std::make_tuple(kind, std::string_view(), std::string_view()));
       it != objects_.end() && std::get<0>(it->first) == kind; ++it) {
    if (ns.has_value() && std::get<1>(it->first) != *ns) continue;
    result.objects.push_back(it->second);
  }
  return result;
}

common::Result<std::vector<LogRecord>> FakeStore::ReadLog(std::string_view stream,
                                                          std::int64_t after_seq,
                                                          std::size_t limit) {
  if (stream.empty()) return common::InvalidArgumentError("ReadLog: empty stream");
  std::lock_guard lock(mu_);
  std::vector<LogRecord> out;
  auto it = std::upper_bound(logs_.begin(), logs_.end(), after_seq,
                             [](std::int64_t seq, const LogRecord& r) { return seq < r.seq; });
  for (; it != logs_.end() && out.size() < limit; ++it) {
    if (it->stream == stream) out.push_back(*it);
  }
  return out;
}

common::Result<std::int64_t> FakeStore::CurrentRevision() {
  std::lock_guard lock(mu_);
  return revision_;
}

common::Result<std::vector<Change>> FakeStore::ChangesSince(std::int64_t after_revision,
                                                            std::size_t limit) {
  if (after_revision < 0) return common::InvalidArgumentError("ChangesSince: negative revision");
  std::lock_guard lock(mu_);
  if (after_revision < compacted_revision_) {
    return internal::CompactedError(after_revision, compacted_revision_);
  }
  std::vector<Change> out;
  auto it = std::upper_bound(
      changes_.begin(), changes_.end(), after_revision,
      [](std::int64_t revision, const Change& c) { return revision < c.revision; });
  for (; it != changes_.end(); ++it) {
    // Whole revisions only: stop at the first boundary once `limit` is reached.
    if (out.size() >= limit && (out.empty() || it->revision != out.back().revision)) break;
    out.push_back(*it);
  }
  return out;
}

common::Status FakeStore::WriteSeries(std::vector<SeriesRecord> records,
                                      std::vector<SeriesPrune> prunes) {
  EGS_RETURN_IF_ERROR(internal::ValidateSeries(records, prunes));
  std::lock_guard lock(mu_);
  for (SeriesRecord& r : records) {
    series_[{std::move(r.series), std::move(r.key), r.at}] = std::move(r.data);
  }
  for (const SeriesPrune& p : prunes) {
    std::erase_if(series_, [&](const auto& entry) {
      return std::get<0>(entry.first) == p.series && std::get<2>(entry.first) < p.before;
    });
  }
  return common::OkStatus();
}

common::Result<std::vector<SeriesRecord>> FakeStore::ReadSeries(
    std::string_view series, common::Time since, const std::optional<SeriesCursor>& after,
    std::size_t limit) {
  if (series.empty()) return common::InvalidArgumentError("ReadSeries: empty series");
  std::lock_guard lock(mu_);
  std::vector<SeriesRecord> out;
  for (const auto& [k, data] : series_) {
    if (out.size() >= limit) break;
    const auto& [s, key, at] = k;
    if (s != series || at < since) continue;
    if (after && std::tie(key, at) <= std::tie(after->key, after->at)) continue;
    out.push_back(SeriesRecord{s, key, at, data});
  }
  return out;
}

}  // namespace egs::store
