// Store: the durable, Kubernetes/etcd-like object store behind the control plane. Every accepted
// change is made durable through Commit before it is acknowledged.
//
// The store is generic: it knows nothing of the domain model. It holds
//   - objects, keyed by (kind, ns, name), each carrying its JSON `data`, a caller-assigned `uid`
//     and a `resource_version` that the store assigns on write (the global revision of the
//     write that last changed it, as in etcd's mod_revision);
//   - append-only logs ("events", "audit", "decisions", ...), each record with a store-assigned
//     sequence number;
//   - a change feed (one Change per object put/delete, by revision) from which the API layer
//     serves watches; it is compacted to the last `change_retention_revisions` revisions.
//
// Revisions: every successful Commit takes new revisions, one per op: op i of a commit made at
// CurrentRevision() == R writes at R + 1 + i (a delete of a missing object uses its revision up
// and writes nothing); a commit without ops takes one, R + 1. No two object writes ever share a
// revision, so a watcher that resumes after the revision of the last change it saw misses
// nothing, even when a commit wrote several objects. Revisions increase and are never reused.
//
// Small key/value metadata (e.g. "scheduler.next_request_id") is stored as objects of the
// reserved cluster-scoped kind kMetaKind; see MetaPut and GetMeta below. Use Get/Commit with
// expected_version directly when the metadata needs optimistic concurrency.
//
// Thread-safety: every Store implementation is safe to call from any number of threads.
// Errors: implementations never throw; every failure is a Status. Besides the codes listed per
// method, any method may return Unavailable (transient: busy database, I/O pressure; retry the
// call) or Internal (corruption, bug).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace egs::store {

struct StoredObject {
  std::string kind;  // "GPUProvisionRequest", "Workspace", ...
  std::string ns;    // namespace; "" for cluster-scoped kinds
  std::string name;
  std::string uid;                    // assigned by the caller
  std::int64_t resource_version = 0;  // assigned by the store: revision of the last write
  common::Time created;               // set by the caller
  std::string data;                   // the object's JSON

  friend bool operator==(const StoredObject&, const StoredObject&) = default;
};

struct WriteOp {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  StoredObject object;  // for kDelete only kind/ns/name matter
  // Optimistic concurrency (checked against the state left by earlier ops of the same commit):
  //   nullopt  unconditional: put creates or replaces; delete of a missing object is a no-op;
  //   0        the object must not exist (create);
  //   N > 0    the stored resource_version must equal N (update / delete).
  std::optional<std::int64_t> expected_version;

  static WriteOp Put(StoredObject object, std::optional<std::int64_t> expected_version);
  static WriteOp Delete(std::string kind, std::string ns, std::string name,
                        std::optional<std::int64_t> expected_version);
};

struct LogRecord {
  std::string stream;    // "events", "audit", "decisions", ...
  std::int64_t seq = 0;  // assigned by the store; increasing across all streams of one store
  common::Time at;       // set by the caller
  std::string data;      // JSON

  friend bool operator==(const LogRecord&, const LogRecord&) = default;
};

struct CommitResult {
  // The commit's last revision (CurrentRevision() once it is durable). Op i of n wrote at
  // revision - n + 1 + i; read an object back for its resource_version.
  std::int64_t revision = 0;
};

struct ListResult {
  std::vector<StoredObject> objects;  // sorted by (ns, name), byte-wise
  // The revision the list is a consistent snapshot of: watch from here (ChangesSince) to see
  // every later change exactly once, like a Kubernetes list's resourceVersion.
  std::int64_t revision = 0;
};

// One object change in the feed.
struct Change {
  std::int64_t revision = 0;
  WriteOp::Type type = WriteOp::Type::kPut;
  // kPut: the object as written. kDelete: the object's last state, with resource_version set to
  // the revision of the delete (as Kubernetes reports DELETED events).
  StoredObject object;
  // The object's state just before this change, so that a watcher starting from a revision R
  // learns each object's state at R from its first change after R. When previous_known,
  // previous_data is the object's data before the write, nullopt if it did not exist (a put that
  // created it); a kDelete's previous_data is its last state (object.data). previous_known is
  // false only for a change recorded before the feed kept previous states (an older schema).
  bool previous_known = false;
  std::optional<std::string> previous_data;
};

// One point of a keyed time series (telemetry history), kept apart from objects, logs and the
// change feed: writing one moves no revision and wakes no watch. (series, key, at) is unique.
struct SeriesRecord {
  std::string series;  // "telemetry.1m", ...
  std::string key;     // what the series is of, e.g. "node-a/0"
  common::Time at;
  std::string data;  // opaque to the store (JSON)

  friend bool operator==(const SeriesRecord&, const SeriesRecord&) = default;
};

// Drop the records of `series` with at < `before` (retention).
struct SeriesPrune {
  std::string series;
  common::Time before;
};

// Where a ReadSeries page ended: the last record's key and time.
struct SeriesCursor {
  std::string key;
  common::Time at;
};

class Store {
 public:
  virtual ~Store() = default;

  // Applies every op, in order, and appends every log record in ONE atomic transaction, and
  // returns only once that transaction is durable (fsync'd per the backend's durability
  // setting). On any error nothing at all is applied. Errors:
  //   InvalidArgument     an op with empty kind or name, a negative expected_version, or a log
  //                       record with an empty stream;
  //   AlreadyExists       expected_version == 0 but the object exists;
  //   NotFound            expected_version > 0 (put or delete) but the object does not exist;
  //   Aborted             expected_version > 0 but the stored resource_version differs (the
  //                       message names kind/ns/name, expected and actual): re-read, retry;
  //   Unavailable         the backend could not take the write now (busy, closing, injected
  //                       fault); nothing was applied: retry.
  virtual common::Result<CommitResult> Commit(std::vector<WriteOp> ops,
                                              std::vector<LogRecord> logs) = 0;

  // The object, or nullopt if it does not exist. No error codes beyond the common ones.
  virtual common::Result<std::optional<StoredObject>> Get(std::string_view kind,
                                                          std::string_view ns,
                                                          std::string_view name) = 0;

  // Every object of `kind` in namespace `ns` (all namespaces when nullopt), with the revision
  // of the snapshot. InvalidArgument for an empty kind.
  virtual common::Result<ListResult> List(std::string_view kind,
                                          std::optional<std::string_view> ns) = 0;

  // Records of `stream` with seq > after_seq, ascending by seq, at most `limit` of them. Page by
  // passing the last seq seen as `after_seq`. InvalidArgument for an empty stream.
  virtual common::Result<std::vector<LogRecord>> ReadLog(std::string_view stream,
                                                         std::int64_t after_seq,
                                                         std::size_t limit) = 0;

  // The revision of the last successful commit; 0 for an empty store.
  virtual common::Result<std::int64_t> CurrentRevision() = 0;

  // Changes with revision > after_revision, ascending by (revision, op order), `limit` of them
  // or fewer. A commit without ops, and a delete of a missing object, leave no change, so the
  // feed's revisions may have gaps. A revision holds one change, except in a feed written
  // before revisions were per op (a commit's changes shared one): whole revisions only are
  // returned, so more than `limit` when such a revision holds more. Empty when nothing is newer.
  // Errors: InvalidArgument for a negative after_revision; Aborted when changes after
  // `after_revision` have been compacted away (like Kubernetes' 410 "too old resource
  // version"): List again and continue from the list's revision.
  virtual common::Result<std::vector<Change>> ChangesSince(std::int64_t after_revision,
                                                           std::size_t limit) = 0;

  // Upserts every record (a record with the same (series, key, at) is replaced), then applies
  // every prune, in ONE transaction, durable when it returns; nothing is applied on error.
  // Touches no object, log, revision or change. Callers batch (egsd writes once a minute).
  // InvalidArgument for a record with an empty series or key, or a prune with an empty series.
  virtual common::Status WriteSeries(std::vector<SeriesRecord> records,
                                     std::vector<SeriesPrune> prunes) = 0;

  // Records of `series` with at >= `since`, ascending by (key, at), strictly after `after` when
  // given, at most `limit` of them. Page by passing the last record's (key, at) as `after`.
  // InvalidArgument for an empty series.
  virtual common::Result<std::vector<SeriesRecord>> ReadSeries(
      std::string_view series, common::Time since, const std::optional<SeriesCursor>& after,
      std::size_t limit) = 0;
};

// Reserved kind for key/value metadata: cluster-scoped objects, name = key, data = value.
inline constexpr std::string_view kMetaKind = "egs.Meta";

// An unconditional put of metadata `key` = `value` (kMetaKind), to pass to Commit.
WriteOp MetaPut(std::string key, std::string value);
// The value stored under metadata `key`, or nullopt. Errors as Store::Get.
common::Result<std::optional<std::string>> GetMeta(Store& store, std::string_view key);

}  // namespace egs::store
