// WebhookSender: posts one notification body to one webhook URL, once. The seam between the
// delivery worker (Dispatcher) and the network; HttpWebhookSender is the real one (cpp-httplib,
// http and https), FakeWebhookSender (fake_webhook_sender.h) scripts outcomes for tests.
//
// Thread-safety: Send may be called concurrently from any number of threads.
#pragma once

#include <optional>
#include <string>

#include "api/notification_codec.h"
#include "common/status.h"
#include "common/time.h"

namespace egs::notify {

struct WebhookRequest {
  api::WebhookUrl url;
  std::string body;         // JSON
  std::string delivery_id;  // stable across retries: "<subscription uid>/<event name>@<revision>"
  std::string reason;       // the event's reason (sent as a header, for receivers' routing)
};

struct SendOutcome {
  // OK for a 2xx answer. Otherwise: Unavailable (connection refused or reset, 5xx, 429),
  // DeadlineExceeded (no answer within the timeout), FailedPrecondition (another status: the
  // receiver refuses the request; retrying the same body will not help).
  common::Status status;
  int http_status = 0;  // 0 when no answer arrived
  // The receiver's Retry-After (seconds form), for 429 and 503.
  std::optional<common::Duration> retry_after;

  // Whether another attempt may succeed.
  bool retryable() const;
};

class WebhookSender {
 public:
  virtual ~WebhookSender() = default;
  // One attempt, bounded by `timeout` for connecting, for sending and for waiting on the answer
  // (each; cpp-httplib has no overall deadline). Never follows redirects.
  virtual SendOutcome Send(const WebhookRequest& request, common::Duration timeout) = 0;
};

class HttpWebhookSender final : public WebhookSender {
 public:
  SendOutcome Send(const WebhookRequest& request, common::Duration timeout) override;
};

}  // namespace egs::notify
