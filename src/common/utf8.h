// UTF-8 validation of text that arrives from outside (request paths, query values, bodies,
// manifests) before it reaches code that requires valid UTF-8, such as nlohmann::json's dump(),
// and where in the text an offending byte is, for the message.
//
// Thread-safety: free functions of values.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace egs::common {

// The byte offset of the first byte of `text` that does not begin a well-formed UTF-8 sequence
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF, no truncated sequence);
// nullopt when all of `text` is valid UTF-8.
std::optional<std::size_t> FindInvalidUtf8(std::string_view text);

inline bool IsValidUtf8(std::string_view text) { return !FindInvalidUtf8(text).has_value(); }

// The line and column (both 1-based, the column counted in bytes) of byte `offset` of `text`.
std::pair<int, int> LineColumnAt(std::string_view text, std::size_t offset);

}  // namespace egs::common
