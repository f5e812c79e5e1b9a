// KubeClusters' per-cluster state, shared by kube_clusters.cc and kube_housekeeping.cc (private
// to those two files).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/kube_clusters.h"
#include "k8s/gpr_mirror.h"
#include "k8s/kube_client.h"
#include "k8s/kubernetes_connector.h"

namespace egs::daemon {

struct KubeClusters::Member {
  // An autoscaled pool's slots as egsd registered them (kube_autoscale.cc).
  struct SlotPool {
    std::string name;
    common::Duration lead_time{0};
    common::Duration failure_backoff{0};
    std::vector<std::pair<core::NodeId, std::string>> slots;
  };
  KubeClusterSettings settings;
  core::ClusterId id;
  std::vector<SlotPool> pools;
  std::vector<std::string> retired_slots;        // slots of pools or indexes no longer configured
  std::map<core::NodeId, std::string> bindings;  // status-sync thread: slot bindings last seen
  k8s::KubeConfig config;
  std::unique_ptr<k8s::KubeClient> api_client;  // for the API's calls and housekeeping
  std::unique_ptr<k8s::KubernetesConnector> connector;
  std::unique_ptr<k8s::GprMirror> mirror;
};

}  // namespace egs::daemon
