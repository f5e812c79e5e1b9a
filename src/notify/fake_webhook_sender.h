// FakeWebhookSender: a WebhookSender for tests. Records every request and answers with scripted
// outcomes (in order; OK once the script is used up).
//
// Thread-safety: safe from any thread.
#pragma once

#include <deque>
#include <mutex>
#include <vector>

#include "notify/webhook_sender.h"

namespace egs::notify {

class FakeWebhookSender final : public WebhookSender {
 public:
  SendOutcome Send(const WebhookRequest& request, common::Duration) override {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
    if (script_.empty()) return SendOutcome{};
    SendOutcome out = script_.front();
    script_.pop_front();
    return out;
  }
  void Script(SendOutcome outcome) {
    std::lock_guard lock(mu_);
    script_.push_back(std::move(outcome));
  }
  std::vector<WebhookRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  mutable std::mutex mu_;
  std::deque<SendOutcome> script_;
  std::vector<WebhookRequest> requests_;
};

}  // namespace egs::notify
