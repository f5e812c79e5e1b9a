#include "daemon/kube_settings.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <optional>
#include <set>
#include <utility>

#include "cluster/fleet_file.h"

namespace egs::daemon {
namespace {

common::Status Error(const std::string& field, const std::string& reason) {
  return common::InvalidArgumentError(fmt::format("{}: {}", field, reason));
}

common::Result<std::string> Scalar(const YAML::Node& v, const std::string& field) {
  if (!v.IsScalar()) return Error(field, "must be a scalar");
  return v.as<std::string>();
}

common::Status SetBool(const YAML::Node& v, const std::string& field, bool& out) {
  EGS_ASSIGN_OR_RETURN(std::string s, Scalar(v, field));
  if (s == "true") {
    out = true;
  } else if (s == "false") {
    out = false;
  } else {
    return Error(field, fmt::format("must be true or false, got \"{}\"", s));
  }
  return common::OkStatus();
}

common::Status SetInt(const YAML::Node& v, const std::string& field, int min, int max, int& out) {
  EGS_ASSIGN_OR_RETURN(std::string s, Scalar(v, field));
  int n = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || ptr != s.data() + s.size() || n < min || n > max) {
    return Error(field, fmt::format("must be an integer in [{}, {}], got \"{}\"", min, max, s));
  }
  out = n;
  return common::OkStatus();
}

common::Status SetDuration(const YAML::Node& v, const std::string& field, common::Duration& out) {
  EGS_ASSIGN_OR_RETURN(std::string s, Scalar(v, field));
  auto d = cluster::ParseFleetDuration(s);
  if (!d.ok() || d->count() <= 0) {
    return Error(field, fmt::format("must be a duration > 0 such as 30s or 5m, got \"{}\"", s));
  }
  out = *d;
  return common::OkStatus();
}

common::Status ApplyShapes(const YAML::Node& v, const std::string& field,
                           std::vector<KubeShapeRule>& out) {
  if (!v.IsSequence()) return Error(field, "must be a list");
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string f = fmt::format("{}[{}]", field, i);
    if (!v[i].IsMap()) return Error(f, "must be a mapping");
    KubeShapeRule rule;
    for (const auto& kv : v[i]) {
      const std::string k = kv.first.as<std::string>();
      const std::string kf = f + "." + k;
      if (k == "gpuProduct") {
        EGS_ASSIGN_OR_RETURN(rule.gpu_product, Scalar(kv.second, kf));
      } else if (k == "gpuCount") {
        EGS_RETURN_IF_ERROR(SetInt(kv.second, kf, 0, 1024, rule.gpu_count));
      } else if (k == "shape") {
        EGS_ASSIGN_OR_RETURN(rule.shape, Scalar(kv.second, kf));
      } else {
        return Error(kf, "unknown key (gpuProduct, gpuCount, shape)");
      }
    }
    if (rule.shape.empty()) return Error(f + ".shape", "required");
    out.push_back(std::move(rule));
  }
  return common::OkStatus();
}

common::Result<std::vector<std::string>> StringList(const YAML::Node& v, const std::string& field) {
  if (!v.IsSequence()) return Error(field, "must be a list");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string f = fmt::format("{}[{}]", field, i);
    EGS_ASSIGN_OR_RETURN(std::string s, Scalar(v[i], f));
    if (s.empty()) return Error(f, "must not be empty");
    out.push_back(std::move(s));
  }
  return out;
}

// A DNS-1123 label (a namespace name): lowercase alphanumerics and '-', 1..63, alphanumeric ends.
bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

common::Status ApplyPreCheckJob(const YAML::Node& v, const std::string& f, PreCheckJobSettings& p) {
  if (!v.IsMap()) return Error(f, "must be a mapping");
  for (const auto& kv : v) {
    const std::string k = kv.first.as<std::string>();
    const std::string kf = f + "." + k;
    if (k == "image") {
      EGS_ASSIGN_OR_RETURN(p.image, Scalar(kv.second, kf));
      if (p.image.empty() || p.image.find_first_of(" \t\n") != std::string::npos) {
        return Error(kf, fmt::format("must be a container image reference, got \"{}\"", p.image));
      }
    } else if (k == "command") {
      EGS_ASSIGN_OR_RETURN(p.command, StringList(kv.second, kf));
    } else if (k == "namespace") {
      EGS_ASSIGN_OR_RETURN(p.ns, Scalar(kv.second, kf));
      if (!IsDnsLabel(p.ns)) {
        return Error(kf,
                     fmt::format("must be a namespace name (DNS-1123 label), got \"{}\"", p.ns));
      }
    } else if (k == "timeout") {
      EGS_RETURN_IF_ERROR(SetDuration(kv.second, kf, p.timeout));
    } else if (k == "pollInterval") {
      EGS_RETURN_IF_ERROR(SetDuration(kv.second, kf, p.poll_interval));
    } else {
      return Error(kf, "unknown key (image, command, namespace, timeout, pollInterval)");
    }
  }
  if (p.image.empty()) return Error(f + ".image", "required");
  return common::OkStatus();
}

// A label value: empty, or up to 63 of [A-Za-z0-9-_.] beginning and ending alphanumeric.
bool IsLabelValue(const std::string& s) {
  if (s.empty()) return true;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// A label key: [prefix/]name, the name a non-empty label value, the prefix a DNS subdomain.
bool IsLabelKey(const std::string& s) {
  const auto slash = s.find('/');
  const std::string name = slash == std::string::npos ? s : s.substr(slash + 1);
  if (name.empty() || !IsLabelValue(name)) return false;
  if (slash == std::string::npos) return true;
  const std::string prefix = s.substr(0, slash);
  if (prefix.empty() || prefix.size() > 253) return false;
  std::size_t begin = 0;
  for (std::size_t dot = prefix.find('.');; dot = prefix.find('.', begin)) {
    if (!IsDnsLabel(prefix.substr(begin, dot - begin))) return false;
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  return true;
}

common::Result<std::map<std::string, std::string>> StringMap(const YAML::Node& v,
                                                             const std::string& field) {
  if (!v.IsMap()) return Error(field, "must be a mapping");
  std::map<std::string, std::string> out;
  for (const auto& kv : v) {
    const std::string k = kv.first.as<std::string>();
    EGS_ASSIGN_OR_RETURN(std::string value, Scalar(kv.second, field + "." + k));
    out[k] = std::move(value);
  }
  return out;
}

common::Status ApplyTolerations(const YAML::Node& v, const std::string& field,
                                std::vector<TolerationSettings>& out) {
  if (!v.IsSequence()) return Error(field, "must be a list");
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string f = fmt::format("{}[{}]", field, i);
    if (!v[i].IsMap()) return Error(f, "must be a mapping");
    TolerationSettings t;
    for (const auto& kv : v[i]) {
      const std::string k = kv.first.as<std::string>();
      const std::string kf = f + "." + k;
      if (k == "key") {
        EGS_ASSIGN_OR_RETURN(t.key, Scalar(kv.second, kf));
        if (!IsLabelKey(t.key)) return Error(kf, fmt::format("not a taint key: \"{}\"", t.key));
      } else if (k == "operator") {
        EGS_ASSIGN_OR_RETURN(t.op, Scalar(kv.second, kf));
        if (t.op != "Equal" && t.op != "Exists") {
          return Error(kf, fmt::format("must be Equal or Exists, got \"{}\"", t.op));
        }
      } else if (k == "value") {
        EGS_ASSIGN_OR_RETURN(t.value, Scalar(kv.second, kf));
        // The API server refuses such a PodTemplate only when egsd first creates it.
        if (!IsLabelValue(t.value)) {
          return Error(kf, fmt::format("not a taint value: \"{}\"", t.value));
        }
      } else if (k == "effect") {
        EGS_ASSIGN_OR_RETURN(t.effect, Scalar(kv.second, kf));
        if (t.effect != "" && t.effect != "NoSchedule" && t.effect != "PreferNoSchedule" &&
            t.effect != "NoExecute") {
          return Error(kf, fmt::format("must be NoSchedule, PreferNoSchedule or NoExecute, got "
                                       "\"{}\"",
                                       t.effect));
        }
      } else {
        return Error(kf, "unknown key (key, operator, value, effect)");
      }
    }
    if (t.op == "Exists" && !t.value.empty()) {
      return Error(f + ".value", "must be empty when operator is Exists");
    }
    if (t.op == "Equal" && t.key.empty()) return Error(f + ".key", "required with Equal");
    out.push_back(std::move(t));
  }
  return common::OkStatus();
}

common::Status ApplyPodTemplate(const YAML::Node& v, const std::string& f,
                                AutoscaledPoolSettings& p) {
  if (!v.IsMap()) return Error(f, "must be a mapping");
  for (const auto& kv : v) {
    const std::string k = kv.first.as<std::string>();
    const std::string kf = f + "." + k;
    if (k == "resources") {
      EGS_ASSIGN_OR_RETURN(p.pod_resources, StringMap(kv.second, kf));
      for (const auto& [name, quantity] : p.pod_resources) {
        if (!IsLabelKey(name)) return Error(kf + "." + name, "not a resource name");
        if (quantity.empty() || quantity.find_first_of(" \t\n") != std::string::npos) {
          return Error(kf + "." + name, fmt::format("not a quantity: \"{}\"", quantity));
        }
      }
    } else if (k == "tolerations") {
      EGS_RETURN_IF_ERROR(ApplyTolerations(kv.second, kf, p.pod_tolerations));
    } else {
      return Error(kf, "unknown key (resources, tolerations)");
    }
  }
  return common::OkStatus();
}

common::Status ApplyAutoscaledPool(const YAML::Node& v, const std::string& f,
                                   AutoscaledPoolSettings& p) {
  if (!v.IsMap()) return Error(f, "must be a mapping");
  std::optional<common::Duration> timeout;
  for (const auto& kv : v) {
    const std::string k = kv.first.as<std::string>();
    const std::string kf = f + "." + k;
    const YAML::Node& x = kv.second;
    if (k == "name") {
      EGS_ASSIGN_OR_RETURN(p.name, Scalar(x, kf));
      if (!IsDnsLabel(p.name)) {
        return Error(kf, fmt::format("must be a DNS-1123 label, got \"{}\"", p.name));
      }
    } else if (k == "shape") {
      EGS_ASSIGN_OR_RETURN(p.shape, Scalar(x, kf));
    } else if (k == "maxNodes") {
      EGS_RETURN_IF_ERROR(SetInt(x, kf, 1, 1000, p.max_nodes));
    } else if (k == "leadTime") {
      EGS_RETURN_IF_ERROR(SetDuration(x, kf, p.lead_time));
    } else if (k == "nodeSelector") {
      EGS_ASSIGN_OR_RETURN(p.node_selector, StringMap(x, kf));
      for (const auto& [key, value] : p.node_selector) {
        if (!IsLabelKey(key)) return Error(kf + "." + key, "not a label key");
        if (!IsLabelValue(value)) {
          return Error(kf + "." + key, fmt::format("not a label value: \"{}\"", value));
        }
      }
    } else if (k == "provisioningClassName") {
      EGS_ASSIGN_OR_RETURN(p.provisioning_class, Scalar(x, kf));
      if (p.provisioning_class.empty()) return Error(kf, "must not be empty");
    } else if (k == "timeout") {
      common::Duration d{0};
      EGS_RETURN_IF_ERROR(SetDuration(x, kf, d));
      timeout = d;
    } else if (k == "failureBackoff") {
      EGS_RETURN_IF_ERROR(SetDuration(x, kf, p.failure_backoff));
    } else if (k == "namespace") {
      EGS_ASSIGN_OR_RETURN(p.ns, Scalar(x, kf));
      if (!IsDnsLabel(p.ns)) {
        return Error(kf,
                     fmt::format("must be a namespace name (DNS-1123 label), got \"{}\"", p.ns));
      }
    } else if (k == "pollInterval") {
      EGS_RETURN_IF_ERROR(SetDuration(x, kf, p.poll_interval));
    } else if (k == "podTemplate") {
      EGS_RETURN_IF_ERROR(ApplyPodTemplate(x, kf, p));
    } else {
      return Error(kf,
                   "unknown key (name, shape, maxNodes, leadTime, nodeSelector, "
                   "provisioningClassName, timeout, failureBackoff, namespace, pollInterval, "
                   "podTemplate)");
    }
  }
  for (const auto& [key, missing] : {std::pair<const char*, bool>{"name", p.name.empty()},
                                     {"shape", p.shape.empty()},
                                     {"maxNodes", p.max_nodes == 0},
                                     {"leadTime", p.lead_time.count() == 0},
                                     {"nodeSelector", p.node_selector.empty()}}) {
    if (missing) return Error(f + "." + key, "required");
  }
  p.timeout = timeout.value_or(2 * p.lead_time);
  if (p.timeout < p.lead_time) return Error(f + ".timeout", "must be at least leadTime");
  return common::OkStatus();
}

common::Status ApplyAutoscaledPools(const YAML::Node& v, const std::string& field,
                                    KubeClusterSettings& c) {
  if (!v.IsSequence()) return Error(field, "must be a list");
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string f = fmt::format("{}[{}]", field, i);
    AutoscaledPoolSettings p;
    EGS_RETURN_IF_ERROR(ApplyAutoscaledPool(v[i], f, p));
    for (const AutoscaledPoolSettings& other : c.autoscaled_pools) {
      if (other.name == p.name) {
        return Error(f + ".name", fmt::format("duplicate pool \"{}\"", p.name));
      }
      // Real nodes are bound to the slots of the pool whose selector they match.
      if (other.node_selector == p.node_selector) {
        return Error(f + ".nodeSelector", fmt::format("the same as pool \"{}\"'s", other.name));
      }
    }
    c.autoscaled_pools.push_back(std::move(p));
  }
  return common::OkStatus();
}

common::Status ApplyCluster(const YAML::Node& v, const std::string& f, KubeClusterSettings& c) {
  if (!v.IsMap()) return Error(f, "must be a mapping");
  for (const auto& kv : v) {
    const std::string k = kv.first.as<std::string>();
    const std::string kf = f + "." + k;
    const YAML::Node& x = kv.second;
    if (k == "name") {
      EGS_ASSIGN_OR_RETURN(c.name, Scalar(x, kf));
      // The name of the Cluster object egsd creates: refused there only after the data
      // directory and the fleet were written.
      if (!c.name.empty() && !IsDnsLabel(c.name)) {
        return Error(kf, fmt::format("must be a DNS-1123 label, got \"{}\"", c.name));
      }
    } else if (k == "project") {
      EGS_ASSIGN_OR_RETURN(c.project, Scalar(x, kf));
    } else if (k == "kubeconfig") {
      EGS_ASSIGN_OR_RETURN(c.kubeconfig, Scalar(x, kf));
    } else if (k == "context") {
      EGS_ASSIGN_OR_RETURN(c.context, Scalar(x, kf));
    } else if (k == "inCluster") {
      EGS_RETURN_IF_ERROR(SetBool(x, kf, c.in_cluster));
    } else if (k == "shapes") {
      EGS_RETURN_IF_ERROR(ApplyShapes(x, kf, c.shapes));
    } else if (k == "labels") {
      if (!x.IsMap()) return Error(kf, "must be a mapping");
      for (const auto& l : x) {
        const std::string lk = l.first.as<std::string>();
        const std::string lf = kf + "." + lk;
        EGS_ASSIGN_OR_RETURN(std::string value, Scalar(l.second, lf));
        if (value.empty()) return Error(lf, "must not be empty");
        if (!IsLabelKey(value)) return Error(lf, fmt::format("not a label key: \"{}\"", value));
        if (lk == "product") {
          c.product_label = value;
        } else if (lk == "count") {
          c.count_label = value;
        } else if (lk == "memory") {
          c.memory_label = value;
        } else {
          return Error(lf, "unknown key (product, count, memory)");
        }
      }
    } else if (k == "gpuResource") {
      EGS_ASSIGN_OR_RETURN(c.gpu_resource, Scalar(x, kf));
      if (!IsLabelKey(c.gpu_resource)) {
        return Error(kf, fmt::format("not a resource name: \"{}\"", c.gpu_resource));
      }
    } else if (k == "steerByNamespaceAnnotations") {
      EGS_RETURN_IF_ERROR(SetBool(x, kf, c.steer_by_namespace_annotations));
    } else if (k == "evictionDeadline") {
      EGS_RETURN_IF_ERROR(SetDuration(x, kf, c.eviction_deadline));
    } else if (k == "retryInitial") {
      EGS_RETURN_IF_ERROR(SetDuration(x, kf, c.retry_initial));
    } else if (k == "retryMax") {
      EGS_RETURN_IF_ERROR(SetDuration(x, kf, c.retry_max));
    } else if (k == "qps") {
      int qps = 0;
      EGS_RETURN_IF_ERROR(SetInt(x, kf, 1, 100000, qps));
      c.qps = qps;
    } else if (k == "burst") {
      EGS_RETURN_IF_ERROR(SetInt(x, kf, 1, 100000, c.burst));
    } else if (k == "homeWorkspaces") {
      EGS_ASSIGN_OR_RETURN(c.home_workspaces, StringList(x, kf));
    } else if (k == "preCheckJob") {
      EGS_RETURN_IF_ERROR(ApplyPreCheckJob(x, kf, c.precheck_job));
    } else if (k == "autoscaledPools") {
      EGS_RETURN_IF_ERROR(ApplyAutoscaledPools(x, kf, c));
    } else {
      return Error(kf, "unknown key");
    }
  }
  if (c.name.empty()) return Error(f + ".name", "required");
  if (c.in_cluster == !c.kubeconfig.empty()) {
    return Error(f, "exactly one of kubeconfig (a file) and inCluster: true is required");
  }
  if (c.shapes.empty()) return Error(f + ".shapes", "at least one rule is required");
  if (c.retry_max < c.retry_initial) {
    return Error(f + ".retryMax", "must be at least retryInitial");
  }
  for (std::size_t i = 0; i < c.autoscaled_pools.size(); ++i) {
    if (c.autoscaled_pools[i].pod_resources.count(c.gpu_resource) > 0) {
      return Error(
          fmt::format("{}.autoscaledPools[{}].podTemplate.resources.{}", f, i, c.gpu_resource),
          "set by egsd (the shape's GPUs per node)");
    }
  }
  return common::OkStatus();
}

common::Status ApplyWebhook(const YAML::Node& v, const std::string& f, WebhookSettings& w) {
  if (!v.IsMap()) return Error(f, "must be a mapping");
  w.enabled = true;
  for (const auto& kv : v) {
    const std::string k = kv.first.as<std::string>();
    const std::string kf = f + "." + k;
    if (k == "listen") {
      EGS_ASSIGN_OR_RETURN(std::string s, Scalar(kv.second, kf));
      const auto colon = s.rfind(':');
      if (colon == std::string::npos || colon == 0) {
        return Error(kf, fmt::format("must be ADDR:PORT, got \"{}\"", s));
      }
      w.listen_host = s.substr(0, colon);
      EGS_RETURN_IF_ERROR(
          SetInt(YAML::Node(s.substr(colon + 1)), kf + " port", 0, 65535, w.listen_port));
    } else if (k == "tls") {
      if (!kv.second.IsMap()) return Error(kf, "must be a mapping");
      for (const auto& t : kv.second) {
        const std::string tk = t.first.as<std::string>();
        if (tk == "certFile") {
          EGS_ASSIGN_OR_RETURN(w.tls_cert_file, Scalar(t.second, kf + ".certFile"));
        } else if (tk == "keyFile") {
          EGS_ASSIGN_OR_RETURN(w.tls_key_file, Scalar(t.second, kf + ".keyFile"));
        } else {
          return Error(kf + "." + tk, "unknown key (certFile, keyFile)");
        }
      }
    } else if (k == "withoutReservation") {
      EGS_ASSIGN_OR_RETURN(std::string s, Scalar(kv.second, kf));
      if (s != "deny" && s != "allow") {
        return Error(kf, fmt::format("must be deny or allow, got \"{}\"", s));
      }
      w.deny_without_reservation = s == "deny";
    } else {
      return Error(kf, "unknown key (listen, tls, withoutReservation)");
    }
  }
  if (w.tls_cert_file.empty() || w.tls_key_file.empty()) {
    return Error(f + ".tls",
                 "certFile and keyFile are required (the API server calls webhooks "
                 "over https only)");
  }
  return common::OkStatus();
}

}  // namespace

std::string AutoscaledSlotName(const std::string& cluster, const std::string& pool, int index) {
  return fmt::format("{}-{}-slot-{}", cluster, pool, index);
}

common::Status ApplyKubernetesYaml(const YAML::Node& node, const std::string& field,
                                   KubernetesSettings& out) {
  if (!node.IsMap()) return Error(field, "must be a mapping");
  KubernetesSettings next = out;
  for (const auto& kv : node) {
    const std::string k = kv.first.as<std::string>();
    const std::string kf = field + "." + k;
    if (k == "clusters") {
      if (!kv.second.IsSequence()) return Error(kf, "must be a list");
      next.clusters.clear();
      std::set<std::string> names;
      std::set<std::string> slots;  // every slot name: they become Node objects of one fleet
      for (std::size_t i = 0; i < kv.second.size(); ++i) {
        KubeClusterSettings c;
        const std::string f = fmt::format("{}[{}]", kf, i);
        EGS_RETURN_IF_ERROR(ApplyCluster(kv.second[i], f, c));
        if (!names.insert(c.name).second) {
          return Error(f + ".name", fmt::format("duplicate cluster \"{}\"", c.name));
        }
        for (std::size_t j = 0; j < c.autoscaled_pools.size(); ++j) {
          const AutoscaledPoolSettings& p = c.autoscaled_pools[j];
          const std::string pf = fmt::format("{}.autoscaledPools[{}].name", f, j);
          const std::string last = AutoscaledSlotName(c.name, p.name, p.max_nodes - 1);
          if (!IsDnsLabel(last)) {
            return Error(pf, fmt::format("slot names such as \"{}\" must be DNS-1123 labels of "
                                         "at most 63 characters: shorten the pool's name",
                                         last));
          }
          for (int s = 0; s < p.max_nodes; ++s) {
            if (!slots.insert(AutoscaledSlotName(c.name, p.name, s)).second) {
              return Error(pf, fmt::format("slot name \"{}\" clashes with another pool's",
                                           AutoscaledSlotName(c.name, p.name, s)));
            }
          }
        }
        next.clusters.push_back(std::move(c));
      }
    } else if (k == "webhook") {
      EGS_RETURN_IF_ERROR(ApplyWebhook(kv.second, kf, next.webhook));
    } else if (k == "memberTokenTtl") {
      EGS_RETURN_IF_ERROR(SetDuration(kv.second, kf, next.member_token_ttl));
    } else if (k == "housekeepingInterval") {
      EGS_RETURN_IF_ERROR(SetDuration(kv.second, kf, next.housekeeping_interval));
    } else {
      return Error(kf, "unknown key (clusters, webhook, memberTokenTtl, housekeepingInterval)");
    }
  }
  out = std::move(next);
  return common::OkStatus();
}

}  // namespace egs::daemon
