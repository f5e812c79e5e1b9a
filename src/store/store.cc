#include "store/store.h"

#include <utility>

namespace egs::store {

WriteOp WriteOp::Put(StoredObject object, std::optional<std::int64_t> expected_version) {
  return WriteOp{Type::kPut, std::move(object), expected_version};
}

WriteOp WriteOp::Delete(std::string kind, std::string ns, std::string name,
                        std::optional<std::int64_t> expected_version) {
  StoredObject object;
  object.kind = std::move(kind);
  object.ns = std::move(ns);
  object.name = std::move(name);
  return WriteOp{Type::kDelete, std::move(object), expected_version};
}

WriteOp MetaPut(std::string key, std::string value) {
  StoredObject object;
  object.kind = std::string(kMetaKind);
  object.name = std::move(key);
  object.data = std::move(value);
  return WriteOp::Put(std::move(object), std::nullopt);
}

common::Result<std::optional<std::string>> GetMeta(Store& store, std::string_view key) {
  EGS_ASSIGN_OR_RETURN(std::optional<StoredObject> object, store.Get(kMetaKind, "", key));
  if (!object.has_value()) return std::optional<std::string>();
  return std::optional<std::string>(std::move(object->data));
}

}  // namespace egs::store
