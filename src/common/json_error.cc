#include "common/json_error.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <tuple>

#include "common/utf8.h"

namespace egs::common {
namespace {

// Accepts every value and records the first error.
class ErrorFinder final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return true; }
  bool boolean(bool /*val*/) override { return true; }
  bool number_integer(number_integer_t /*val*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*val*/) override { return true; }
  bool number_float(number_float_t /*val*/, const string_t& /*s*/) override { return true; }
  bool string(string_t& /*val*/) override { return true; }
  bool binary(binary_t& /*val*/) override { return true; }
  bool start_object(std::size_t /*elements*/) override { return true; }
  bool key(string_t& /*val*/) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t /*elements*/) override { return true; }
  bool end_array() override { return true; }

  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::json::exception& ex) override {
    // `position` counts the bytes read, the last one being where the parser stopped. A number
    // out of range was read whole: its start is where the user should look.
    std::size_t offset = position > 0 ? position - 1 : 0;
    if (ex.id == 406 && last_token.size() <= position) offset = position - last_token.size();
    std::string_view what = ex.what();
    if (auto bracket = what.find("] "); bracket != std::string_view::npos) {
      what.remove_prefix(bracket + 2);
    }
    error = JsonError{offset, 0, 0, std::string(what)};
    return false;
  }

  std::optional<JsonError> error;
};

}  // namespace

std::optional<JsonError> FindJsonError(std::string_view text) {
  ErrorFinder finder;
  nlohmann::json::sax_parse(text, &finder);
  if (finder.error) {
    std::tie(finder.error->line, finder.error->column) = LineColumnAt(text, finder.error->offset);
  }
  return finder.error;
}

void DuplicateKeyFinder::On(nlohmann::json::parse_event_t event, const nlohmann::json& parsed) {
  using E = nlohmann::json::parse_event_t;
  switch (event) {
    case E::object_start:
    case E::array_start:
      frames_.push_back(Frame{event == E::array_start, 0, {}, {}, ChildPath()});
      return;
    case E::key: {
      Frame& f = frames_.back();
      f.key = parsed.get<std::string>();
      if (!f.keys.insert(f.key).second && !duplicate_) duplicate_ = ChildPath();
      return;
    }
    case E::value:
      if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
      return;
    case E::object_end:
    case E::array_end:
      frames_.pop_back();
      if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
      return;
  }
}

std::string DuplicateKeyFinder::ChildPath() const {
  if (frames_.empty()) return "";
  const Frame& f = frames_.back();
  if (f.array) return fmt::format("{}[{}]", f.path, f.index);
  return f.path.empty() ? f.key : fmt::format("{}.{}", f.path, f.key);
}

}  // namespace egs::common
