#include "notify/webhook_sender.h"

#include <fmt/format.h>
#include <httplib.h>

#include <charconv>

namespace egs::notify {
namespace {

// cpp-httplib takes (seconds, microseconds).
std::pair<time_t, time_t> Split(common::Duration d) {
  const auto us = std::max<std::int64_t>(d.count(), 1000);
  return {static_cast<time_t>(us / 1'000'000), static_cast<time_t>(us % 1'000'000)};
}

std::optional<common::Duration> RetryAfter(const httplib::Response& res) {
  if (!res.has_header("Retry-After")) return std::nullopt;
  const std::string v = res.get_header_value("Retry-After");
  int seconds = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
  if (ec != std::errc() || end != v.data() + v.size() || seconds < 0) return std::nullopt;
  return common::Seconds(seconds);
}

}  // namespace

bool SendOutcome::retryable() const {
  return status.code() == common::StatusCode::kUnavailable ||
         status.code() == common::StatusCode::kDeadlineExceeded;
}

SendOutcome HttpWebhookSender::Send(const WebhookRequest& request, common::Duration timeout) {
  SendOutcome out;
  httplib::Client cli(request.url.scheme_host_port());
  auto [sec, usec] = Split(timeout);
  cli.set_connection_timeout(sec, usec);
  cli.set_read_timeout(sec, usec);
  cli.set_write_timeout(sec, usec);
  cli.set_follow_location(false);
  cli.set_keep_alive(false);
  httplib::Headers headers = {{"User-Agent", "egsd-notify/1"},
                              {"X-EGS-Delivery", request.delivery_id},
                              {"X-EGS-Event-Reason", request.reason}};
  auto res = cli.Post(request.url.path, headers, request.body, "application/json");
  if (!res) {
    const httplib::Error e = res.error();
    const std::string what = httplib::to_string(e);
    if (e == httplib::Error::Read || e == httplib::Error::Write) {
      out.status = common::DeadlineExceededError(
          fmt::format("{}: no answer within {} ({})", request.url.scheme_host_port(),
                      common::FormatGoDuration(timeout), what));
    } else {
      out.status = common::UnavailableError(
          fmt::format("{}: {} error", request.url.scheme_host_port(), what));
    }
    return out;
  }
  out.http_status = res->status;
  if (res->status >= 200 && res->status < 300) return out;
  std::string body = res->body.substr(0, 200);
  std::string msg = fmt::format("HTTP {} from {}{}", res->status, request.url.scheme_host_port(),
                                body.empty() ? "" : ": " + body);
  if (res->status >= 500 || res->status == 429 || res->status == 408) {
    out.status = common::UnavailableError(std::move(msg));
    if (res->status == 429 || res->status == 503) out.retry_after = RetryAfter(*res);
  } else {
    out.status = common::FailedPreconditionError(std::move(msg));
  }
  return out;
}

}  // namespace egs::notify
