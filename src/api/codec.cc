#include "api/codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "api/notification_codec.h"
#include "core/fleet.h"
#include "core/request.h"
#include "core/workspace.h"

namespace egs::api {

std::optional<std::int64_t> ParseInt64(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

namespace {

using common::Duration;
using common::Result;
using common::Status;
using common::Time;
using nlohmann::json;

Status Invalid(std::string_view path, std::string_view why) {
  return common::InvalidArgumentError(fmt::format("{}: {}", path, why));
}

std::string Join(std::string_view base, std::string_view key) {
  if (base.empty()) return std::string(key);
  return fmt::format("{}.{}", base, key);
}

std::string Index(std::string_view base, std::size_t i) { return fmt::format("{}[{}]", base, i); }

// "string", "integer", "number", "boolean", "object", "array", "null".
std::string_view JsonTypeName(const json& v) {
  if (v.is_number_integer()) return "integer";
  switch (v.type()) {
    case json::value_t::string:
      return "string";
    case json::value_t::number_float:
      return "number";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::null:
      return "null";
    default:
      return "value";
  }
}

Status WrongType(std::string_view path, std::string_view expected, const json& v) {
  return Invalid(path, fmt::format("expected {}, got {}", expected, JsonTypeName(v)));
}

// Integral JSON numbers (2 or 2.0) within [lo, hi].
Result<std::int64_t> AsInteger(const json& v, std::string_view path, std::int64_t lo,
                               std::int64_t hi) {
  std::int64_t out = 0;
  if (v.is_number_unsigned()) {
    auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) return Invalid(path, "out of range");
    out = static_cast<std::int64_t>(u);
  } else if (v.is_number_integer()) {
    out = v.get<std::int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || d < -9.2e18 || d > 9.2e18) {
      return WrongType(path, "integer", v);
    }
    out = static_cast<std::int64_t>(d);
  } else {
    return WrongType(path, "integer", v);
  }
  if (out < lo || out > hi) return Invalid(path, "out of range");
  return out;
}

// Reads the fields of one JSON object, remembering the first error and which keys were read, so
// that Finish() can name unknown fields. Null values count as absent.
class ObjectReader {
 public:
  ObjectReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  const json& value() const { return j_; }
  // Marks every key as read (after a nested parse that checked them itself).
  void KnowAll() {
    for (auto it = j_.begin(); it != j_.end(); ++it) known_.insert(it.key());
  }
  std::string Path(std::string_view key) const { return Join(path_, key); }
  bool ok() const { return status_.ok(); }
  void Fail(Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  void Ignore(std::string_view key) { known_.emplace(key); }

  // The value at `key`, or nullptr when absent or null (or after an error).
  const json* Find(std::string_view key) {
    known_.emplace(key);
    if (!status_.ok()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  // Whether the key is present and not null (does not mark it as read).
  bool Has(std::string_view key) const {
    auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }
  const json* Require(std::string_view key) {
    const json* v = Find(key);
    if (v == nullptr) Fail(Invalid(Path(key), "is required"));
    return v;
  }

  void String(std::string_view key, std::string* out, bool required = false) {
    const json* v = required ? Require(key) : Find(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(WrongType(Path(key), "string", *v));
    *out = v->get<std::string>();
    if (required && out->empty()) Fail(Invalid(Path(key), "must not be empty"));
  }
  void Int(std::string_view key, int* out, std::int64_t min = std::numeric_limits<int>::min(),
           std::int64_t max = std::numeric_limits<int>::max()) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (auto r = ReadInt(key, *v, min, max)) *out = static_cast<int>(*r);
  }
  void OptInt(std::string_view key, std::optional<int>* out, std::int64_t min) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (auto r = ReadInt(key, *v, min, std::numeric_limits<int>::max())) {
      *out = static_cast<int>(*r);
    }
  }
  void OptInt64(std::string_view key, std::optional<std::int64_t>* out) {
    const json* v = Find(key);
    if (v == nullptr) return;
    auto r = AsInteger(*v, Path(key), std::numeric_limits<std::int64_t>::min(),
                       std::numeric_limits<std::int64_t>::max());
    if (!r) return Fail(r.error());
    *out = *r;
  }
  void OptDouble(std::string_view key, std::optional<double>* out, double min,
                 double max = std::numeric_limits<double>::max()) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_number()) return Fail(WrongType(Path(key), "number", *v));
    double d = v->get<double>();
    if (!std::isfinite(d)) return Fail(Invalid(Path(key), "must be finite"));
    if (d < min) return Fail(Invalid(Path(key), fmt::format("must be >= {}", min)));
    if (d > max) return Fail(Invalid(Path(key), fmt::format("must be <= {:.0f}", max)));
    *out = d;
  }
  void Double(std::string_view key, double* out, double min, double max) {
    std::optional<double> d;
    OptDouble(key, &d, min);
    if (!d) return;
    if (*d > max) return Fail(Invalid(Path(key), fmt::format("must be <= {}", max)));
    *out = *d;
  }
  void Bool(std::string_view key, bool* out) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_boolean()) return Fail(WrongType(Path(key), "boolean", *v));
    *out = v->get<bool>();
  }
  // A duration >= 0, or > 0 when `positive`.
  void OptDur(std::string_view key, std::optional<Duration>* out, bool positive) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(WrongType(Path(key), "duration string", *v));
    auto d = ParseDuration(v->get<std::string>());
    if (!d) return Fail(Invalid(Path(key), d.error().message()));
    if (positive && d->count() <= 0) return Fail(Invalid(Path(key), "must be > 0"));
    *out = *d;
  }
  void Dur(std::string_view key, Duration* out, bool positive, bool required = false) {
    if (required && Require(key) == nullptr) return;
    std::optional<Duration> d;
    OptDur(key, &d, positive);
    if (d) *out = *d;
  }
  void OptTime(std::string_view key, std::optional<Time>* out) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(WrongType(Path(key), "RFC 3339 time string", *v));
    auto t = ParseTime(v->get<std::string>());
    if (!t) return Fail(Invalid(Path(key), t.error().message()));
    *out = *t;
  }
  void ReqTime(std::string_view key, Time* out) {
    if (Require(key) == nullptr) return;
    std::optional<Time> t;
    OptTime(key, &t);
    if (t) *out = *t;
  }
  // An array of non-empty strings; with `dns_labels` each must be a DNS-1123 label.
  void Strings(std::string_view key, std::vector<std::string>* out, bool dns_labels = false) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(WrongType(Path(key), "array of strings", *v));
    out->clear();
    for (std::size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      std::string p = Index(Path(key), i);
      if (!e.is_string()) return Fail(WrongType(p, "string", e));
      std::string s = e.get<std::string>();
      if (s.empty()) return Fail(Invalid(p, "must not be empty"));
      if (dns_labels && !IsDns1123Label(s)) {
        return Fail(Invalid(p, "must be a DNS-1123 label"));
      }
      out->push_back(std::move(s));
    }
  }
  const json* Object(std::string_view key, bool required = false) {
    const json* v = required ? Require(key) : Find(key);
    if (v == nullptr) return nullptr;
    if (!v->is_object()) {
      Fail(WrongType(Path(key), "object", *v));
      return nullptr;
    }
    return v;
  }
  const json* Array(std::string_view key) {
    const json* v = Find(key);
    if (v == nullptr) return nullptr;
    if (!v->is_array()) {
      Fail(WrongType(Path(key), "array", *v));
      return nullptr;
    }
    return v;
  }
  // Merges a nested parse's outcome.
  template <typename T>
  bool Take(Result<T> r, T* out) {
    if (!r) {
      Fail(r.error());
      return false;
    }
    *out = std::move(r).value();
    return true;
  }

  // The first error; with `strict`, also an error for any key nobody read.
  Status Finish(bool strict = true) {
    if (!status_.ok() || !strict) return status_;
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!known_.count(it.key())) return Invalid(Path(it.key()), "unknown field");
    }
    return status_;
  }

 private:
  std::optional<std::int64_t> ReadInt(std::string_view key, const json& v, std::int64_t min,
                                      std::int64_t max) {
    auto r =
        AsInteger(v, Path(key), std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
    if (!r) {
      Fail(r.error());
      return std::nullopt;
    }
    if (*r < min) {
      Fail(Invalid(Path(key), fmt::format("must be >= {}", min)));
      return std::nullopt;
    }
    if (*r > max) {
      Fail(Invalid(Path(key), fmt::format("must be <= {}", max)));
      return std::nullopt;
    }
    return r.value();
  }

  const json& j_;
  std::string path_;
  std::set<std::string, std::less<>> known_;
  Status status_;
};

Status ExpectObject(const json& j, std::string_view path) {
  if (!j.is_object()) return WrongType(path.empty() ? "object" : path, "object", j);
  return common::OkStatus();
}

// Reads apiVersion/kind/metadata and returns the reader positioned for the kind's own fields.
Result<ObjectMeta> ReadEnvelope(ObjectReader& r, std::string_view kind) {
  std::string api_version;
  std::string k;
  r.String("apiVersion", &api_version);
  r.String("kind", &k);
  if (!r.ok()) return r.Finish(false);
  if (!api_version.empty() && api_version != kApiVersion) {
    return Invalid("apiVersion",
                   fmt::format("must be \"{}\", not \"{}\"", kApiVersion, api_version));
  }
  if (!k.empty() && k != kind) {
    return Invalid("kind", fmt::format("must be \"{}\", not \"{}\"", kind, k));
  }
  const json* m = r.Object("metadata", /*required=*/true);
  if (m == nullptr) return r.Finish(false);
  return ParseObjectMeta(*m, "metadata");
}

void PutMeta(json& out, std::string_view kind, const ObjectMeta& meta) {
  out["apiVersion"] = kApiVersion;
  out["kind"] = kind;
  out["metadata"] = ToJson(meta);
}

void PutIf(json& j, const char* key, const std::string& v) {
  if (!v.empty()) j[key] = v;
}
void PutIf(json& j, const char* key, const std::optional<Time>& t) {
  if (t) j[key] = FormatTime(*t);
}
void PutIf(json& j, const char* key, const std::optional<int>& v) {
  if (v) j[key] = *v;
}
void PutIf(json& j, const char* key, const std::optional<double>& v) {
  if (v) j[key] = *v;
}
void PutIf(json& j, const char* key, const std::vector<std::string>& v) {
  if (!v.empty()) j[key] = v;
}

bool OneOf(std::string_view v, std::initializer_list<std::string_view> allowed) {
  return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

std::string Quoted(std::initializer_list<std::string_view> allowed) {
  std::string out;
  for (auto a : allowed) {
    if (!out.empty()) out += ", ";
    out += fmt::format("\"{}\"", a);
  }
  return out;
}

void CheckEnum(ObjectReader& r, std::string_view key, const std::string& v,
               std::initializer_list<std::string_view> allowed) {
  if (!r.ok() || v.empty() || OneOf(v, allowed)) return;
  r.Fail(Invalid(r.Path(key), fmt::format("must be one of {}", Quoted(allowed))));
}

// Unit lengths in nanoseconds for ParseDuration.
struct DurationUnit {
  std::string_view name;
  double ns;
};
constexpr std::array<DurationUnit, 7> kDurationUnits = {{{"ns", 1},
                                                         {"us", 1e3},
                                                         {"\xC2\xB5s", 1e3},  // µs
                                                         {"ms", 1e6},
                                                         {"s", 1e9},
                                                         {"m", 60e9},
                                                         {"h", 3600e9}}};

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 chars.
bool IsQualifiedNamePart(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

}  // namespace

// ---- Scalars -------------------------------------------------------------------------------

Result<Duration> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return common::InvalidArgumentError(fmt::format(
        "invalid duration \"{}\": want a Go-style duration, numbers with units ns, us, ms, s, "
        "m, h (e.g. 90m, 4h, 1h30m; 2 days is 48h)",
        text));
  };
  if (text.empty()) return bad();
  if (text == "0") return Duration(0);
  std::string_view s = text;
  if (s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '-') return bad();
  double total_ns = 0;
  while (!s.empty()) {
    // <digits>[.<digits>]
    std::size_t i = 0;
    double value = 0;
    bool digits = false;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      value = value * 10 + (s[i] - '0');
      digits = true;
      ++i;
    }
    if (i < s.size() && s[i] == '.') {
      ++i;
      double scale = 0.1;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        value += (s[i] - '0') * scale;
        scale /= 10;
        digits = true;
        ++i;
      }
    }
    if (!digits) return bad();
    s.remove_prefix(i);
    // The longest unit that matches ("ms" before "m").
    const DurationUnit* unit = nullptr;
    for (const auto& u : kDurationUnits) {
      if (s.substr(0, u.name.size()) == u.name &&
          (unit == nullptr || u.name.size() > unit->name.size())) {
        unit = &u;
      }
    }
    if (unit == nullptr) return bad();
    s.remove_prefix(unit->name.size());
    total_ns += value * unit->ns;
    // Go's limit: int64 nanoseconds (2562047h47m16.854775807s).
    if (total_ns > 9223372036854775807.0) {
      return common::InvalidArgumentError(fmt::format(
          "invalid duration \"{}\": too long, at most 2562047h47m16s (Go's limit)", text));
    }
  }
  return Duration(static_cast<std::int64_t>(std::llround(total_ns / 1e3)));
}

Result<Time> ParseTime(std::string_view text) {
  auto bad = [&] { return common::InvalidArgumentError(fmt::format("invalid time \"{}\"", text)); };
  std::size_t pos = 0;
  auto num = [&](int width, int* out) {
    if (pos + width > text.size()) return false;
    int v = 0;
    for (int i = 0; i < width; ++i) {
      char c = text[pos + i];
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    pos += width;
    *out = v;
    return true;
  };
  auto lit = [&](std::string_view chars) {
    if (pos >= text.size() || chars.find(text[pos]) == std::string_view::npos) return false;
    ++pos;
    return true;
  };
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!num(4, &year) || !lit("-") || !num(2, &month) || !lit("-") || !num(2, &day) || !lit("Tt") ||
      !num(2, &hour) || !lit(":") || !num(2, &minute) || !lit(":") || !num(2, &second)) {
    return bad();
  }
  std::int64_t micros = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int n = 0;
    std::int64_t scale = 100'000;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      micros += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
      ++n;
    }
    if (n == 0) return bad();
  }
  int offset_minutes = 0;
  if (lit("Zz")) {
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh = 0, om = 0;
    if (!num(2, &oh) || !lit(":") || !num(2, &om) || oh > 23 || om > 59) return bad();
    offset_minutes = sign * (oh * 60 + om);
  } else {
    return bad();
  }
  if (pos != text.size()) return bad();
  std::chrono::year_month_day ymd{std::chrono::year(year),
                                  std::chrono::month(static_cast<unsigned>(month)),
                                  std::chrono::day(static_cast<unsigned>(day))};
  if (!ymd.ok() || hour > 23 || minute > 59 || second > 59) return bad();
  Time t = std::chrono::time_point_cast<Duration>(std::chrono::sys_days(ymd)) +
           std::chrono::hours(hour) + std::chrono::minutes(minute) + std::chrono::seconds(second) +
           Duration(micros) - std::chrono::minutes(offset_minutes);
  return t;
}

std::string FormatTime(Time t) { return common::FormatTime(t); }

bool IsDns1123Label(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(name.front()) || !lower_alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return lower_alnum(c) || c == '-'; });
}

bool IsDns1123Subdomain(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = name.find('.', start);
    std::string_view label = name.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (!IsDns1123Label(label)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool IsLabelKey(std::string_view key) {
  std::size_t slash = key.find('/');
  if (slash == std::string_view::npos) return IsQualifiedNamePart(key);
  return IsDns1123Subdomain(key.substr(0, slash)) && IsQualifiedNamePart(key.substr(slash + 1));
}

bool IsLabelValue(std::string_view value) { return value.empty() || IsQualifiedNamePart(value); }

// ---- Label selectors ---------------------------------------------------------------------------

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& req : requirements) {
    auto it = labels.find(req.key);
    bool has = it != labels.end();
    auto in_values = [&] {
      return has && std::find(req.values.begin(), req.values.end(), it->second) != req.values.end();
    };
    bool ok = true;
    switch (req.op) {
      case LabelRequirement::Op::kEquals:
      case LabelRequirement::Op::kIn:
        ok = in_values();
        break;
      case LabelRequirement::Op::kNotEquals:
      case LabelRequirement::Op::kNotIn:
        ok = !in_values();
        break;
      case LabelRequirement::Op::kExists:
        ok = has;
        break;
      case LabelRequirement::Op::kDoesNotExist:
        ok = !has;
        break;
      case LabelRequirement::Op::kGreaterThan:
      case LabelRequirement::Op::kLessThan: {
        if (!has) return false;
        // Parse checked the bound; a label value that is not an int64 matches neither.
        const std::optional<std::int64_t> v = ParseInt64(it->second);
        const std::optional<std::int64_t> bound = ParseInt64(req.values.front());
        if (!v || !bound) return false;
        ok = req.op == LabelRequirement::Op::kGreaterThan ? *v > *bound : *v < *bound;
        break;
      }
    }
    if (!ok) return false;
  }
  return true;
}

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits on commas outside parentheses.
std::vector<std::string_view> SplitRequirements(std::string_view text, bool* balanced) {
  std::vector<std::string_view> out;
  int depth = 0;
  std::size_t start = 0;
  *balanced = true;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')' && --depth < 0) *balanced = false;
    if (text[i] == ',' && depth == 0) {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) *balanced = false;
  out.push_back(text.substr(start));
  return out;
}

Result<LabelRequirement> ParseRequirement(std::string_view raw) {
  std::string_view s = Trim(raw);
  auto bad = [&](std::string_view why) {
    return common::InvalidArgumentError(fmt::format("labelSelector \"{}\": {}", s, why));
  };
  auto check_key = [&](std::string_view key) -> Status {
    if (!IsLabelKey(key)) return bad(fmt::format("invalid label key \"{}\"", key));
    return common::OkStatus();
  };
  auto check_value = [&](std::string_view v) -> Status {
    if (!IsLabelValue(v)) return bad(fmt::format("invalid label value \"{}\"", v));
    return common::OkStatus();
  };
  LabelRequirement req;
  if (s.empty()) return bad("empty requirement");
  if (s.front() == '!') {
    req.key = std::string(Trim(s.substr(1)));
    req.op = LabelRequirement::Op::kDoesNotExist;
    EGS_RETURN_IF_ERROR(check_key(req.key));
    return req;
  }
  // Set-based: "key in (a,b)" / "key notin (a,b)".
  std::size_t key_end = 0;
  while (key_end < s.size() && s[key_end] != ' ' && s[key_end] != '\t' && s[key_end] != '=' &&
         s[key_end] != '!' && s[key_end] != '<' && s[key_end] != '>') {
    ++key_end;
  }
  req.key = std::string(s.substr(0, key_end));
  EGS_RETURN_IF_ERROR(check_key(req.key));
  std::string_view rest = Trim(s.substr(key_end));
  if (rest.empty()) {
    req.op = LabelRequirement::Op::kExists;
    return req;
  }
  auto set_op = [&](std::string_view word, LabelRequirement::Op op) -> std::optional<Status> {
    if (rest.substr(0, word.size()) != word) return std::nullopt;
    std::string_view list = Trim(rest.substr(word.size()));
    if (list.size() < 2 || list.front() != '(' || list.back() != ')') {
      return bad(fmt::format("expected a parenthesized list after '{}'", word));
    }
    list = list.substr(1, list.size() - 2);
    if (Trim(list).empty()) {
      // As Kubernetes: an empty set matched nothing ("in") or everything ("notin") silently.
      return bad(fmt::format("the set of values after '{}' must not be empty", word));
    }
    req.op = op;
    std::size_t start = 0;
    while (true) {
      std::size_t comma = list.find(',', start);
      std::string_view v =
          Trim(list.substr(start, comma == std::string_view::npos ? comma : comma - start));
      EGS_RETURN_IF_ERROR(check_value(v));
      req.values.emplace_back(v);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return common::OkStatus();
  };
  if (auto st = set_op("notin", LabelRequirement::Op::kNotIn)) {
    if (!st->ok()) return *st;
    return req;
  }
  if (auto st = set_op("in", LabelRequirement::Op::kIn)) {
    if (!st->ok()) return *st;
    return req;
  }
  std::string_view value;
  if (rest.substr(0, 2) == "==") {
    req.op = LabelRequirement::Op::kEquals;
    value = rest.substr(2);
  } else if (rest.substr(0, 2) == "!=") {
    req.op = LabelRequirement::Op::kNotEquals;
    value = rest.substr(2);
  } else if (rest.front() == '=') {
    req.op = LabelRequirement::Op::kEquals;
    value = rest.substr(1);
  } else if (rest.front() == '>' || rest.front() == '<') {
    req.op =
        rest.front() == '>' ? LabelRequirement::Op::kGreaterThan : LabelRequirement::Op::kLessThan;
    value = Trim(rest.substr(1));
    std::string v(value);
    if (!ParseInt64(v)) return bad("expected an integer (int64) after '>' or '<'");
    req.values.push_back(std::move(v));
    return req;
  } else {
    return bad("expected one of =, ==, !=, in, notin, >, <");
  }
  value = Trim(value);
  EGS_RETURN_IF_ERROR(check_value(value));
  req.values.emplace_back(value);
  return req;
}

}  // namespace

Result<LabelSelector> ParseLabelSelector(std::string_view text) {
  LabelSelector sel;
  if (Trim(text).empty()) return sel;
  bool balanced = true;
  auto parts = SplitRequirements(text, &balanced);
  if (!balanced) {
    return common::InvalidArgumentError(
        fmt::format("labelSelector \"{}\": unbalanced parentheses", text));
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    // An empty requirement ("a,,b", a trailing comma) is quoted in the whole selector: alone it
    // would be quoted as "".
    if (Trim(parts[i]).empty()) {
      return common::InvalidArgumentError(
          fmt::format("labelSelector \"{}\": requirement {} is empty", text, i + 1));
    }
    EGS_ASSIGN_OR_RETURN(LabelRequirement req, ParseRequirement(parts[i]));
    sel.requirements.push_back(std::move(req));
  }
  return sel;
}

// ---- ObjectMeta ----------------------------------------------------------------------------

namespace {

// Kubernetes ObjectMeta fields a client may send back (kubectl keeps them on get/edit/apply)
// that EGS does not use; accepted and dropped.
constexpr std::array<std::string_view, 8> kIgnoredMetaFields = {"generation",
                                                                "managedFields",
                                                                "ownerReferences",
                                                                "selfLink",
                                                                "deletionGracePeriodSeconds",
                                                                "generateName",
                                                                "resourceVersionMatch",
                                                                "clusterName"};

Status ReadStringMap(ObjectReader& r, std::string_view key, bool labels,
                     std::map<std::string, std::string>* out) {
  const json* m = r.Object(key);
  if (m == nullptr) return r.Finish(false);
  std::size_t total = 0;
  for (auto it = m->begin(); it != m->end(); ++it) {
    std::string p = fmt::format("{}[{}]", r.Path(key), it.key());
    if (!IsLabelKey(it.key())) {
      return Invalid(p,
                     "key must be a qualified name ([prefix/]name, name 1-63 chars of "
                     "[A-Za-z0-9-_.])");
    }
    if (!it->is_string()) return WrongType(p, "string", *it);
    std::string v = it->get<std::string>();
    if (labels && !IsLabelValue(v)) {
      return Invalid(p,
                     "value must be empty or 1-63 chars of [A-Za-z0-9-_.] starting and ending "
                     "alphanumeric");
    }
    total += it.key().size() + v.size();
    (*out)[it.key()] = std::move(v);
  }
  if (!labels && total > std::size_t{256} * 1024)
    return Invalid(r.Path(key), "must total at most 256 KiB");
  return common::OkStatus();
}

}  // namespace

Result<ObjectMeta> ParseObjectMeta(const json& j, std::string_view path) {
  EGS_RETURN_IF_ERROR(ExpectObject(j, path));
  ObjectMeta meta;
  ObjectReader r(j, std::string(path));
  r.String("name", &meta.name, /*required=*/true);
  if (r.ok() && !IsDns1123Label(meta.name)) {
    return Invalid(r.Path("name"),
                   "must be a DNS-1123 label (lower case letters, digits and '-', 1-63 chars)");
  }
  r.String("namespace", &meta.ns);
  if (r.ok() && !meta.ns.empty() && !IsDns1123Label(meta.ns)) {
    return Invalid(r.Path("namespace"), "must be a DNS-1123 label");
  }
  r.String("uid", &meta.uid);
  if (const json* rv = r.Find("resourceVersion")) {
    if (rv->is_string()) {
      const std::string s = rv->get<std::string>();
      char* end = nullptr;
      long long v = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && (*end != '\0' || v < 0)) {
        return Invalid(r.Path("resourceVersion"), fmt::format("invalid resourceVersion \"{}\"", s));
      }
      meta.resource_version = v;
    } else if (rv->is_number_integer() && rv->get<std::int64_t>() >= 0) {
      meta.resource_version = rv->get<std::int64_t>();
    } else {
      return WrongType(r.Path("resourceVersion"), "string", *rv);
    }
  }
  r.OptTime("creationTimestamp", &meta.creation_timestamp);
  r.OptTime("deletionTimestamp", &meta.deletion_timestamp);
  r.Strings("finalizers", &meta.finalizers);
  if (!r.ok()) return r.Finish();
  EGS_RETURN_IF_ERROR(ReadStringMap(r, "labels", /*labels=*/true, &meta.labels));
  EGS_RETURN_IF_ERROR(ReadStringMap(r, "annotations", /*labels=*/false, &meta.annotations));
  for (auto f : kIgnoredMetaFields) r.Ignore(f);
  EGS_RETURN_IF_ERROR(r.Finish());
  return meta;
}

json ToJson(const ObjectMeta& meta) {
  json m = json::object();
  m["name"] = meta.name;
  if (!meta.ns.empty()) m["namespace"] = meta.ns;
  if (!meta.uid.empty()) m["uid"] = meta.uid;
  if (meta.resource_version > 0) m["resourceVersion"] = std::to_string(meta.resource_version);
  if (meta.creation_timestamp) m["creationTimestamp"] = FormatTime(*meta.creation_timestamp);
  if (!meta.labels.empty()) m["labels"] = meta.labels;
  if (!meta.annotations.empty()) m["annotations"] = meta.annotations;
  if (meta.deletion_timestamp) m["deletionTimestamp"] = FormatTime(*meta.deletion_timestamp);
  if (!meta.finalizers.empty()) m["finalizers"] = meta.finalizers;
  return m;
}

// ---- Kinds -----------------------------------------------------------------------------------

namespace {

// Runs `read_spec` (and `read_status`, lenient) over a standard object of `kind`.
template <typename Doc, typename SpecFn, typename StatusFn>
Result<Doc> ParseStandard(const json& j, std::string_view kind, SpecFn read_spec,
                          StatusFn read_status) {
  EGS_RETURN_IF_ERROR(ExpectObject(j, ""));
  Doc doc;
  ObjectReader top(j, "");
  EGS_ASSIGN_OR_RETURN(doc.meta, ReadEnvelope(top, kind));
  if (const json* spec = top.Object("spec")) {
    ObjectReader r(*spec, "spec");
    read_spec(r, doc);
    EGS_RETURN_IF_ERROR(r.Finish());
  } else {
    EGS_RETURN_IF_ERROR(top.Finish(false));
    static const json kEmpty = json::object();
    ObjectReader r(kEmpty, "spec");
    read_spec(r, doc);  // required fields report "spec.x: is required"
    EGS_RETURN_IF_ERROR(r.Finish(false));
  }
  if (const json* status = top.Object("status")) {
    ObjectReader r(*status, "status");
    read_status(r, doc);
    EGS_RETURN_IF_ERROR(r.Finish(/*strict=*/false));
  }
  EGS_RETURN_IF_ERROR(top.Finish());
  return doc;
}

template <typename Doc>
void NoStatus(ObjectReader&, Doc&) {}

}  // namespace

constexpr std::size_t kMaxDisplayName = 128;

Result<ProjectDoc> ParseProject(const json& j) {
  return ParseStandard<ProjectDoc>(
      j, "Project",
      [](ObjectReader& r, ProjectDoc& d) {
        r.String("displayName", &d.display_name);
        if (!r.ok()) return;
        if (d.display_name.size() > kMaxDisplayName) {
          r.Fail(Invalid(r.Path("displayName"),
                         fmt::format("must be at most {} characters", kMaxDisplayName)));
        } else if (std::any_of(d.display_name.begin(), d.display_name.end(),
                               [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
          r.Fail(Invalid(r.Path("displayName"), "must not contain control characters"));
        }
      },
      NoStatus<ProjectDoc>);
}

json ToJson(const ProjectDoc& d) {
  json j;
  PutMeta(j, "Project", d.meta);
  j["spec"] = json::object();
  PutIf(j["spec"], "displayName", d.display_name);
  return j;
}

Result<ClusterDoc> ParseCluster(const json& j) {
  return ParseStandard<ClusterDoc>(
      j, "Cluster",
      [](ObjectReader& r, ClusterDoc& d) {
        r.String("project", &d.project);
        r.String("provider", &d.provider, /*required=*/true);
        CheckEnum(r, "provider", d.provider, {"simulated", "kubernetes"});
        r.String("cloud", &d.cloud);
        r.String("region", &d.region);
      },
      [](ObjectReader& r, ClusterDoc& d) {
        r.String("health", &d.health);
        CheckEnum(r, "health", d.health, {"Healthy", "Degraded", "Unreachable"});
      });
}

json ToJson(const ClusterDoc& d) {
  json j;
  PutMeta(j, "Cluster", d.meta);
  json spec = json::object();
  PutIf(spec, "project", d.project);
  spec["provider"] = d.provider;
  PutIf(spec, "cloud", d.cloud);
  PutIf(spec, "region", d.region);
  j["spec"] = std::move(spec);
  j["status"] = json::object();
  PutIf(j["status"], "health", d.health);
  return j;
}

Result<GpuShapeDoc> ParseGpuShape(const json& j) {
  return ParseStandard<GpuShapeDoc>(
      j, "GPUShape",
      [](ObjectReader& r, GpuShapeDoc& d) {
        r.String("gpuModel", &d.gpu_model, /*required=*/true);
        r.Int("gpusPerNode", &d.gpus_per_node, 1, 1024);
        r.Int("memoryPerGpuMiB", &d.memory_per_gpu_mib, 0);
        r.String("interconnect", &d.interconnect);
        r.OptDouble("pricePerGpuHour", &d.price_per_gpu_hour, 0, core::kMaxPricePerGpuHour);
        r.Dur("provisioningLeadTime", &d.provisioning_lead_time, /*positive=*/false);
      },
      NoStatus<GpuShapeDoc>);
}

json ToJson(const GpuShapeDoc& d) {
  json j;
  PutMeta(j, "GPUShape", d.meta);
  json spec = {{"gpuModel", d.gpu_model},
               {"gpusPerNode", d.gpus_per_node},
               {"memoryPerGpuMiB", d.memory_per_gpu_mib}};
  PutIf(spec, "interconnect", d.interconnect);
  PutIf(spec, "pricePerGpuHour", d.price_per_gpu_hour);
  if (d.provisioning_lead_time.count() != 0) {
    spec["provisioningLeadTime"] = common::FormatGoDuration(d.provisioning_lead_time);
  }
  j["spec"] = std::move(spec);
  return j;
}

namespace {

void ReadGpus(ObjectReader& r, NodeDoc& d) {
  const json* gpus = r.Array("gpus");
  if (gpus == nullptr) return;
  std::set<int> seen;
  for (std::size_t i = 0; i < gpus->size() && r.ok(); ++i) {
    std::string p = Index(r.Path("gpus"), i);
    const json& g = (*gpus)[i];
    if (!g.is_object()) return r.Fail(WrongType(p, "object", g));
    GpuDoc gpu;
    gpu.index = static_cast<int>(i);
    ObjectReader gr(g, p);
    gr.Int("index", &gpu.index, 0, 1023);
    gr.String("uuid", &gpu.uuid);
    gr.String("model", &gpu.model);
    gr.Int("memoryMiB", &gpu.memory_mib, 0);
    gr.String("migMode", &gpu.mig_mode);
    CheckEnum(gr, "migMode", gpu.mig_mode, {"Disabled", "Enabled"});
    if (gpu.mig_mode.empty()) gpu.mig_mode = "Disabled";
    if (Status s = gr.Finish(); !s.ok()) return r.Fail(s);
    if (!seen.insert(gpu.index).second) {
      return r.Fail(Invalid(Join(p, "index"), fmt::format("duplicate index {}", gpu.index)));
    }
    d.gpus.push_back(std::move(gpu));
  }
}

void ReadSchedule(ObjectReader& r, NodeDoc& d) {
  const json* sched = r.Array("schedule");
  if (sched == nullptr) return;
  for (std::size_t i = 0; i < sched->size() && r.ok(); ++i) {
    std::string p = Index(r.Path("schedule"), i);
    const json& e = (*sched)[i];
    if (!e.is_object()) return r.Fail(WrongType(p, "object", e));
    NodeBookingDoc b;
    ObjectReader er(e, p);
    er.String("request", &b.request);
    er.String("workspace", &b.workspace);
    er.ReqTime("start", &b.start);
    er.ReqTime("end", &b.end);
    er.Int("gpus", &b.gpus, 0);
    if (Status s = er.Finish(false); !s.ok()) return r.Fail(s);
    d.schedule.push_back(std::move(b));
  }
}

}  // namespace

Result<NodeDoc> ParseNode(const json& j) {
  return ParseStandard<NodeDoc>(
      j, "Node",
      [](ObjectReader& r, NodeDoc& d) {
        r.String("cluster", &d.cluster, /*required=*/true);
        r.String("shape", &d.shape, /*required=*/true);
        ReadGpus(r, d);
        r.Dur("provisioningLeadTime", &d.provisioning_lead_time, /*positive=*/false);
      },
      [](ObjectReader& r, NodeDoc& d) {
        r.String("health", &d.health);
        CheckEnum(r, "health", d.health, {"Healthy", "Unhealthy", "Cordoned"});
        ReadSchedule(r, d);
      });
}

json ToJson(const NodeDoc& d) {
  json j;
  PutMeta(j, "Node", d.meta);
  json gpus = json::array();
  for (const auto& g : d.gpus) {
    json gj = {{"index", g.index}, {"memoryMiB", g.memory_mib}, {"migMode", g.mig_mode}};
    PutIf(gj, "uuid", g.uuid);
    PutIf(gj, "model", g.model);
    gpus.push_back(std::move(gj));
  }
  j["spec"] = {{"cluster", d.cluster}, {"shape", d.shape}, {"gpus", std::move(gpus)}};
  if (d.provisioning_lead_time.count() != 0) {
    j["spec"]["provisioningLeadTime"] = common::FormatGoDuration(d.provisioning_lead_time);
  }
  json status = json::object();
  PutIf(status, "health", d.health);
  json sched = json::array();
  for (const auto& b : d.schedule) {
    sched.push_back({{"request", b.request},
                     {"workspace", b.workspace},
                     {"start", FormatTime(b.start)},
                     {"end", FormatTime(b.end)},
                     {"gpus", b.gpus}});
  }
  status["schedule"] = std::move(sched);
  j["status"] = std::move(status);
  return j;
}

Result<WorkspacePolicyDoc> ParseWorkspacePolicy(const json& j, std::string_view path) {
  if (!j.is_object()) return WrongType(path, "object", j);
  WorkspacePolicyDoc p;
  ObjectReader r(j, std::string(path));
  r.OptInt("gpuQuota", &p.gpu_quota, 0);
  r.Strings("allowedShapes", &p.allowed_shapes);
  r.Strings("allowedClusters", &p.allowed_clusters);
  r.Int("minPriority", &p.min_priority);
  r.Int("maxPriority", &p.max_priority);
  if (r.ok() && p.min_priority > p.max_priority) {
    r.Fail(Invalid(r.Path("maxPriority"), "must be >= minPriority"));
  }
  r.OptInt("maxNodesPerRequest", &p.max_nodes_per_request, 1);
  r.OptDur("maxDuration", &p.max_duration, /*positive=*/true);
  r.Int("maxActiveRequests", &p.max_active_requests, 1);
  r.Bool("shareNodes", &p.share_nodes);
  r.Bool("preemptible", &p.preemptible);
  r.Bool("requeueOnPreemption", &p.requeue_on_preemption);
  r.Dur("minRuntime", &p.min_runtime, /*positive=*/false);
  r.Dur("preemptionNotice", &p.preemption_notice, /*positive=*/false);
  r.String("onNodeFailure", &p.on_node_failure);
  if (r.ok() && !core::ParseNodeFailureAction(p.on_node_failure)) {
    r.Fail(Invalid(r.Path("onNodeFailure"), "must be \"Continue\" or \"Requeue\""));
  }
  r.Bool("idleCountsDouble", &p.idle_counts_double);
  r.Bool("mayBurst", &p.may_burst);
  r.OptDur("idleTimeout", &p.idle_timeout, /*positive=*/true);
  r.Double("idleThresholdPercent", &p.idle_threshold_percent, 0, 100);
  r.Dur("idleGrace", &p.idle_grace, /*positive=*/false);
  r.Dur("promiseTolerance", &p.promise_tolerance, /*positive=*/false);
  r.Dur("fairShareHalfLife", &p.fair_share_half_life, /*positive=*/true);
  EGS_RETURN_IF_ERROR(r.Finish());
  return p;
}

json ToJson(const WorkspacePolicyDoc& p) {
  json j = json::object();
  PutIf(j, "gpuQuota", p.gpu_quota);
  PutIf(j, "allowedShapes", p.allowed_shapes);
  PutIf(j, "allowedClusters", p.allowed_clusters);
  j["minPriority"] = p.min_priority;
  j["maxPriority"] = p.max_priority;
  PutIf(j, "maxNodesPerRequest", p.max_nodes_per_request);
  if (p.max_duration) j["maxDuration"] = common::FormatGoDuration(*p.max_duration);
  j["maxActiveRequests"] = p.max_active_requests;
  j["shareNodes"] = p.share_nodes;
  j["preemptible"] = p.preemptible;
  j["requeueOnPreemption"] = p.requeue_on_preemption;
  j["minRuntime"] = common::FormatGoDuration(p.min_runtime);
  j["preemptionNotice"] = common::FormatGoDuration(p.preemption_notice);
  j["onNodeFailure"] = p.on_node_failure;
  j["idleCountsDouble"] = p.idle_counts_double;
  j["mayBurst"] = p.may_burst;
  if (p.idle_timeout) j["idleTimeout"] = common::FormatGoDuration(*p.idle_timeout);
  j["idleThresholdPercent"] = p.idle_threshold_percent;
  j["idleGrace"] = common::FormatGoDuration(p.idle_grace);
  j["promiseTolerance"] = common::FormatGoDuration(p.promise_tolerance);
  j["fairShareHalfLife"] = common::FormatGoDuration(p.fair_share_half_life);
  return j;
}

Result<WorkspaceDoc> ParseWorkspace(const json& j) {
  return ParseStandard<WorkspaceDoc>(
      j, "Workspace",
      [](ObjectReader& r, WorkspaceDoc& d) {
        r.String("project", &d.project, /*required=*/true);
        r.Strings("namespaces", &d.namespaces, /*dns_labels=*/true);
        if (const json* members = r.Array("members")) {
          for (std::size_t i = 0; i < members->size() && r.ok(); ++i) {
            std::string p = Index(r.Path("members"), i);
            const json& m = (*members)[i];
            if (!m.is_object()) return r.Fail(WrongType(p, "object", m));
            MemberDoc member;
            ObjectReader mr(m, p);
            mr.String("user", &member.user, /*required=*/true);
            mr.String("role", &member.role, /*required=*/true);
            CheckEnum(mr, "role", member.role, {"viewer", "member", "project-admin", "admin"});
            if (Status s = mr.Finish(); !s.ok()) return r.Fail(s);
            d.members.push_back(std::move(member));
          }
        }
        if (const json* policy = r.Object("policy")) {
          r.Take(ParseWorkspacePolicy(*policy, r.Path("policy")), &d.policy);
        }
      },
      [](ObjectReader& r, WorkspaceDoc& d) {
        r.Int("activeRequests", &d.active_requests, 0);
        r.Int("gpusInUse", &d.gpus_in_use, 0);
      });
}

json ToJson(const WorkspaceDoc& d) {
  json j;
  PutMeta(j, "Workspace", d.meta);
  json members = json::array();
  for (const auto& m : d.members) members.push_back({{"user", m.user}, {"role", m.role}});
  j["spec"] = {{"project", d.project},
               {"namespaces", d.namespaces},
               {"members", std::move(members)},
               {"policy", ToJson(d.policy)}};
  j["status"] = {{"activeRequests", d.active_requests}, {"gpusInUse", d.gpus_in_use}};
  return j;
}

Result<GprSpecDoc> ParseGprSpec(const json& j, std::string_view path) {
  if (!j.is_object()) return WrongType(path, "object", j);
  GprSpecDoc s;
  ObjectReader r(j, std::string(path));
  bool has_shapes = j.contains("shapes") && !j["shapes"].is_null();
  bool has_shape = j.contains("shape") && !j["shape"].is_null();
  if (has_shapes && has_shape) {
    return Invalid(r.Path("shape"), "set either shape or shapes, not both");
  }
  if (has_shape) {
    std::string shape;
    r.String("shape", &shape, /*required=*/true);
    if (r.ok()) s.shapes = {shape};
    s.single_shape_form = true;
  } else {
    r.Ignore("shape");
    r.Strings("shapes", &s.shapes);
    if (r.ok() && s.shapes.empty())
      r.Fail(Invalid(r.Path("shapes"), "must name at least one shape"));
  }
  r.Strings("clusters", &s.clusters);
  r.Int("nodes", &s.nodes, 1, core::kMaxRequestNodes);
  r.Int("gpusPerNode", &s.gpus_per_node, 0);
  r.Dur("duration", &s.duration, /*positive=*/true, /*required=*/true);
  s.priority_given = r.Has("priority");
  r.Int("priority", &s.priority);
  r.OptTime("earliestStart", &s.earliest_start);
  EGS_RETURN_IF_ERROR(r.Finish());
  return s;
}

json ToJson(const GprSpecDoc& s) {
  json j = json::object();
  if (s.single_shape_form && s.shapes.size() == 1) {
    j["shape"] = s.shapes.front();
  } else {
    j["shapes"] = s.shapes;
  }
  PutIf(j, "clusters", s.clusters);
  j["nodes"] = s.nodes;
  j["gpusPerNode"] = s.gpus_per_node;
  j["duration"] = common::FormatGoDuration(s.duration);
  j["priority"] = s.priority;
  PutIf(j, "earliestStart", s.earliest_start);
  return j;
}

namespace {

void ReadGprStatus(ObjectReader& r, GprStatusDoc& s) {
  r.String("phase", &s.phase);
  r.String("reason", &s.reason);
  r.String("message", &s.message);
  r.OptInt64("requestId", &s.request_id);
  r.OptInt("queuePosition", &s.queue_position, 0);
  r.OptTime("plannedStart", &s.planned_start);
  r.String("waitCause", &s.wait_cause);
  r.String("plannedCluster", &s.planned_cluster);
  r.String("plannedShape", &s.planned_shape);
  r.Strings("plannedNodes", &s.planned_nodes);
  r.OptTime("promisedStart", &s.promised_start);
  r.OptTime("promisedStartP50", &s.promised_start_p50);
  r.OptTime("promisedStartP90", &s.promised_start_p90);
  r.OptTime("startTime", &s.start_time);
  r.OptTime("endTime", &s.end_time);
  r.OptTime("finishTime", &s.finish_time);
  r.Strings("nodes", &s.nodes);
  r.String("cluster", &s.cluster);
  r.String("shape", &s.shape);
  if (const json* pe = r.Object("pendingExtension")) {
    PendingExtensionDoc ext;
    ObjectReader er(*pe, r.Path("pendingExtension"));
    er.Dur("duration", &ext.duration, /*positive=*/false);
    er.String("reason", &ext.reason);
    if (Status st = er.Finish(false); !st.ok()) return r.Fail(st);
    s.pending_extension = std::move(ext);
  }
  r.Int("requeues", &s.requeues, 0);
}

}  // namespace

json ToJson(const GprStatusDoc& s) {
  json j = json::object();
  PutIf(j, "phase", s.phase);
  PutIf(j, "reason", s.reason);
  PutIf(j, "message", s.message);
  if (s.request_id) j["requestId"] = *s.request_id;
  PutIf(j, "queuePosition", s.queue_position);
  PutIf(j, "plannedStart", s.planned_start);
  PutIf(j, "waitCause", s.wait_cause);
  PutIf(j, "plannedCluster", s.planned_cluster);
  PutIf(j, "plannedShape", s.planned_shape);
  PutIf(j, "plannedNodes", s.planned_nodes);
  PutIf(j, "promisedStart", s.promised_start);
  PutIf(j, "promisedStartP50", s.promised_start_p50);
  PutIf(j, "promisedStartP90", s.promised_start_p90);
  PutIf(j, "startTime", s.start_time);
  PutIf(j, "endTime", s.end_time);
  PutIf(j, "finishTime", s.finish_time);
  PutIf(j, "nodes", s.nodes);
  PutIf(j, "cluster", s.cluster);
  PutIf(j, "shape", s.shape);
  if (s.pending_extension) {
    j["pendingExtension"] = {{"duration", common::FormatGoDuration(s.pending_extension->duration)},
                             {"reason", s.pending_extension->reason}};
  }
  if (s.requeues) j["requeues"] = s.requeues;
  return j;
}

Result<GprDoc> ParseGpr(const json& j) {
  return ParseStandard<GprDoc>(
      j, "GPUProvisionRequest",
      [](ObjectReader& r, GprDoc& d) {
        r.Take(ParseGprSpec(r.value(), r.path()), &d.spec);
        r.KnowAll();
      },
      [](ObjectReader& r, GprDoc& d) { ReadGprStatus(r, d.status); });
}

json ToJson(const GprDoc& d) {
  json j;
  PutMeta(j, "GPUProvisionRequest", d.meta);
  j["spec"] = ToJson(d.spec);
  j["status"] = ToJson(d.status);
  return j;
}

Result<EventDoc> ParseEvent(const json& j) {
  EGS_RETURN_IF_ERROR(ExpectObject(j, ""));
  EventDoc d;
  ObjectReader r(j, "");
  EGS_ASSIGN_OR_RETURN(d.meta, ReadEnvelope(r, "Event"));
  r.String("type", &d.type);
  if (d.type.empty()) d.type = "Normal";
  CheckEnum(r, "type", d.type, {"Normal", "Warning"});
  r.String("reason", &d.reason);
  r.String("message", &d.message);
  if (const json* obj = r.Object("involvedObject")) {
    ObjectReader o(*obj, "involvedObject");
    o.String("kind", &d.involved_object.kind);
    o.String("namespace", &d.involved_object.ns);
    o.String("name", &d.involved_object.name);
    o.String("uid", &d.involved_object.uid);
    for (auto f : {"apiVersion", "resourceVersion", "fieldPath"}) o.Ignore(f);
    EGS_RETURN_IF_ERROR(o.Finish());
  }
  r.OptTime("firstTimestamp", &d.first_timestamp);
  r.OptTime("lastTimestamp", &d.last_timestamp);
  r.Int("count", &d.count, 0);
  // Fields of core/v1 Event that EGS does not use.
  for (auto f : {"source", "reportingComponent", "reportingInstance", "eventTime", "action",
                 "related", "series"}) {
    r.Ignore(f);
  }
  EGS_RETURN_IF_ERROR(r.Finish());
  return d;
}

json ToJson(const EventDoc& d) {
  json j;
  PutMeta(j, "Event", d.meta);
  j["type"] = d.type;
  j["reason"] = d.reason;
  j["message"] = d.message;
  json obj = json::object();
  PutIf(obj, "kind", d.involved_object.kind);
  PutIf(obj, "namespace", d.involved_object.ns);
  PutIf(obj, "name", d.involved_object.name);
  PutIf(obj, "uid", d.involved_object.uid);
  j["involvedObject"] = std::move(obj);
  PutIf(j, "firstTimestamp", d.first_timestamp);
  PutIf(j, "lastTimestamp", d.last_timestamp);
  j["count"] = d.count;
  return j;
}

namespace {

json ToJson(const QuoteOptionDoc& o) {
  json j = json::object();
  j["shape"] = o.shape;
  PutIf(j, "cluster", o.cluster);
  PutIf(j, "start", o.start);
  PutIf(j, "startP50", o.start_p50);
  PutIf(j, "startP90", o.start_p90);
  PutIf(j, "waitSeconds", o.wait_seconds);
  PutIf(j, "price", o.price);
  PutIf(j, "cause", o.cause);
  PutIf(j, "reason", o.reason);
  PutIf(j, "nodes", o.nodes);
  return j;
}

Result<QuoteOptionDoc> ParseQuoteOption(const json& j, std::string path) {
  if (!j.is_object()) return WrongType(path, "object", j);
  QuoteOptionDoc o;
  ObjectReader r(j, std::move(path));
  r.String("shape", &o.shape);
  r.String("cluster", &o.cluster);
  r.OptTime("start", &o.start);
  r.OptTime("startP50", &o.start_p50);
  r.OptTime("startP90", &o.start_p90);
  r.OptDouble("waitSeconds", &o.wait_seconds, -std::numeric_limits<double>::max());
  r.OptDouble("price", &o.price, 0);
  r.String("cause", &o.cause);
  r.String("reason", &o.reason);
  r.Strings("nodes", &o.nodes);
  EGS_RETURN_IF_ERROR(r.Finish(/*strict=*/false));
  return o;
}

}  // namespace

json ToJson(const QuoteDoc& q) {
  json j = json::object();
  PutIf(j, "queuePosition", q.queue_position);
  j["needsApproval"] = q.needs_approval;
  json options = json::array();
  for (const auto& o : q.options) options.push_back(ToJson(o));
  j["options"] = std::move(options);
  if (q.best) j["best"] = ToJson(*q.best);
  return j;
}

Result<QuoteDoc> ParseQuote(const json& j) {
  EGS_RETURN_IF_ERROR(ExpectObject(j, ""));
  QuoteDoc q;
  ObjectReader r(j, "");
  r.OptInt("queuePosition", &q.queue_position, 0);
  r.Bool("needsApproval", &q.needs_approval);
  if (const json* options = r.Array("options")) {
    for (std::size_t i = 0; i < options->size() && r.ok(); ++i) {
      QuoteOptionDoc o;
      if (r.Take(ParseQuoteOption((*options)[i], Index("options", i)), &o)) {
        q.options.push_back(std::move(o));
      }
    }
  }
  if (const json* best = r.Object("best")) {
    QuoteOptionDoc o;
    if (r.Take(ParseQuoteOption(*best, "best"), &o)) q.best = std::move(o);
  }
  EGS_RETURN_IF_ERROR(r.Finish(/*strict=*/false));
  return q;
}

Status ValidateObject(std::string_view kind, const json& j) {
  if (kind == "Project") return ParseProject(j).status();
  if (kind == "Cluster") return ParseCluster(j).status();
  if (kind == "GPUShape") return ParseGpuShape(j).status();
  if (kind == "Node") return ParseNode(j).status();
  if (kind == "Workspace") return ParseWorkspace(j).status();
  if (kind == "GPUProvisionRequest") return ParseGpr(j).status();
  if (kind == "Event") return ParseEvent(j).status();
  if (kind == kNotificationSubscriptionKind) return ParseNotificationSubscription(j).status();
  return common::NotFoundError(fmt::format("no codec for kind \"{}\"", kind));
}

}  // namespace egs::api
