// KubeClusters' per-cluster state, shared by kube_clusters.cc and kube_housekeeping.cc (private
// to those two files).
#pragma once

#include <memory>

#include "daemon/kube_clusters.h"
#include "k8s/gpr_mirror.h"
#include "k8s/kube_client.h"
#include "k8s/kubernetes_connector.h"

namespace egs::daemon {

struct KubeClusters::Member {
  KubeClusterSettings settings;
  core::ClusterId id;
  k8s::KubeConfig config;
  std::unique_ptr<k8s::KubeClient> api_client;  // for the API's calls and housekeeping
  std::unique_ptr<k8s::KubernetesConnector> connector;
  std::unique_ptr<k8s::GprMirror> mirror;
};

}  // namespace egs::daemon
