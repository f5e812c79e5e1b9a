// token create|list|revoke, config set-server|set-token|set-namespace|view, version.
#include <fmt/format.h>

#include <regex>

#include "egsctl/cli_time.h"
#include "egsctl/command.h"
#include "egsctl/egsctl.h"
#include "egsctl/yaml_json.h"

namespace egs::egsctl {
namespace {

using nlohmann::json;

const Resource& Tokens() { return **FindResource("tokens"); }

// The secret of a freshly issued token, wherever the server put it.
std::string SecretOf(const json& issued) {
  for (auto path : {std::initializer_list<std::string_view>{"status", "token"},
                    std::initializer_list<std::string_view>{"token"},
                    std::initializer_list<std::string_view>{"status", "secret"},
                    std::initializer_list<std::string_view>{"secret"}}) {
    if (std::string s = TextAt(issued, path); !s.empty()) return s;
  }
  return "";
}

common::Status TokenCreate(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 0, ""));
  auto user = ctx.args.Get("user");
  auto role = ctx.args.Get("role");
  if (!user || user->empty()) return common::InvalidArgumentError("--user is required");
  if (!role || role->empty()) return common::InvalidArgumentError("--role is required");
  json spec = {{"user", *user}, {"role", *role}};
  if (auto ws = ctx.args.GetList("workspace"); !ws.empty()) spec["workspaces"] = ws;
  if (auto projects = ctx.args.GetList("project"); !projects.empty()) spec["projects"] = projects;
  if (auto ttl = ctx.args.Get("ttl")) {
    auto parsed = ParseDuration(*ttl);
    if (!parsed.ok()) return parsed.error().WithContext("--ttl");
    const common::Duration d = *parsed;
    if (d.count() <= 0) return common::InvalidArgumentError("--ttl must be positive");
    // RFC 3339 times end with the year 9999.
    constexpr common::Time kLastExpiry = common::FromUnixMicros(253402300799000000);
    if (d > kLastExpiry - ctx.clock.Now()) {
      return common::InvalidArgumentError(fmt::format(
          "--ttl: {} is too long: the token would expire after the year 9999 (leave --ttl out "
          "for a token that never expires)",
          *ttl));
    }
    spec["expires"] =
        common::FormatTime(std::chrono::floor<std::chrono::seconds>(ctx.clock.Now() + d));
  }
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  json body = {{"apiVersion", kApiVersion}, {"kind", "Token"}, {"spec", spec}};
  EGS_ASSIGN_OR_RETURN(json issued, client->Post(CollectionPath(Tokens(), ""), body));
  if (ctx.format == OutputFormat::kJson) {
    ctx.out << issued.dump(4) << "\n";
    return common::OkStatus();
  }
  if (ctx.format == OutputFormat::kYaml) {
    ctx.out << ToYaml(issued);
    return common::OkStatus();
  }
  ctx.out << QualifiedName(Tokens(), issued) << " created\n";
  if (std::string secret = SecretOf(issued); !secret.empty()) {
    ctx.out << "token: " << secret << "\n";
    ctx.err << "Save this token now: it is not shown again.\n";
  }
  return common::OkStatus();
}

common::Status TokenList(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 0, ""));
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  EGS_ASSIGN_OR_RETURN(json list, client->Get(CollectionPath(Tokens(), "")));
  std::vector<json> items;
  if (list.is_object() && list.contains("items") && list["items"].is_array()) {
    items = list["items"].get<std::vector<json>>();
  }
  PrintObjects(ctx.out, ctx.err, Tokens(), items, false, ctx.format, false, "", ctx.clock.Now());
  return common::OkStatus();
}

common::Status TokenRevoke(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 1, "token ID"));
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  const std::string& id = ctx.positionals[0];
  EGS_RETURN_IF_ERROR(client->Delete(ObjectPath(Tokens(), "", id)).error());
  ctx.out << "token/" << id << " revoked\n";
  return common::OkStatus();
}

common::Status SaveSetting(Context& ctx, std::string ConfigFile::*field, const char* what) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 1, what));
  ConfigFile config = ctx.config;
  config.*field = ctx.positionals[0];
  EGS_RETURN_IF_ERROR(SaveConfigFile(ctx.config_path, config));
  ctx.out << fmt::format("{} set in {}\n", what, ctx.config_path);
  return common::OkStatus();
}

common::Status ConfigSetServer(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 1, "server URL"));
  ClientOptions check;
  check.server = ctx.positionals[0];
  EGS_RETURN_IF_ERROR(ApiClient::Create(check, ctx.clock).error());
  return SaveSetting(ctx, &ConfigFile::server, "server");
}

common::Status ConfigSetToken(Context& ctx) {
  return SaveSetting(ctx, &ConfigFile::token, "token");
}

common::Status ConfigSetNamespace(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 1, "namespace"));
  // A Kubernetes namespace name: a DNS-1123 label.
  static const std::regex kLabel("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$");
  if (!std::regex_match(ctx.positionals[0], kLabel)) {
    return common::InvalidArgumentError(fmt::format(
        "namespace \"{}\": must be a DNS-1123 label (lower case letters, digits and '-', 1-63 "
        "chars)",
        ctx.positionals[0]));
  }
  return SaveSetting(ctx, &ConfigFile::ns, "namespace");
}

common::Status ConfigView(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 0, ""));
  bool raw = ctx.args.GetBool("raw");
  auto token = [&](const std::string& t) { return t.empty() || raw ? t : std::string("REDACTED"); };
  json view = {{"file", ctx.config_path},
               {"server", ctx.config.server},
               {"token", token(ctx.config.token)},
               {"namespace", ctx.config.ns},
               {"effective",
                {{"server", ctx.settings.server},
                 {"token", token(ctx.settings.token)},
                 {"namespace", ctx.settings.ns}}}};
  if (ctx.format == OutputFormat::kJson) {
    ctx.out << view.dump(4) << "\n";
  } else {
    ctx.out << ToYaml(view);
  }
  return common::OkStatus();
}

common::Status Version(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 0, ""));
  const bool structured = ctx.format == OutputFormat::kJson || ctx.format == OutputFormat::kYaml;
  if (ctx.output_given && !structured) {
    return common::InvalidArgumentError("--output: version prints json or yaml (or plain text)");
  }
  // As kubectl version -o json: {"clientVersion": {...}, "serverVersion": {...}}.
  json doc = {{"clientVersion", {{"gitVersion", kVersion}}}};
  if (!structured) ctx.out << "Client Version: " << kVersion << "\n";
  if (!ctx.args.GetBool("client")) {
    EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
    EGS_ASSIGN_OR_RETURN(json v, client->Get("/version"));
    doc["serverVersion"] = v;
    if (!structured) {
      std::string server = TextAt(v, {"gitVersion"});
      ctx.out << "Server Version: " << (server.empty() ? v.dump() : server) << "\n";
    }
  }
  if (ctx.format == OutputFormat::kJson) ctx.out << doc.dump(4) << "\n";
  if (ctx.format == OutputFormat::kYaml) ctx.out << ToYaml(doc);
  return common::OkStatus();
}

// A workspace member's kubeconfig for a Kubernetes cluster of egsd (service account + token).
common::Status Kubeconfig(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 1, "WORKSPACE"));
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  QueryParams query = {{"format", "json"}};
  if (auto member = ctx.args.Get("member")) query.emplace_back("member", *member);
  if (auto cluster = ctx.args.Get("cluster")) query.emplace_back("cluster", *cluster);
  EGS_ASSIGN_OR_RETURN(
      json r, client->Get("/apis/egs.dev/v1alpha1/workspaces/" + ctx.positionals[0] + "/kubeconfig",
                          query));
  ctx.out << r.value("kubeconfig", "");
  return common::OkStatus();
}

}  // namespace

std::vector<Command> AdminCommands() {
  return {
      {"kubeconfig",
       "egsctl kubeconfig WORKSPACE [--member U] [--cluster C] > member.kubeconfig",
       "Download a workspace member's kubeconfig for a Kubernetes cluster (default member: you)",
       {{"member", 0, true, "the member (admins only; default: the token's user)"},
        {"cluster", 0, true, "the Kubernetes cluster (needed when egsd has several)"}},
       &Kubeconfig},
      {"token create",
       "egsctl token create --user U --role R [--workspace W]... [--project P]... [--ttl 24h]",
       "Issue an API token (the secret is shown once)",
       {{"user", 0, true, "user name"},
        {"role", 0, true,
         "admin, project-admin, member, viewer, or node (an agent's: --user system:node:NODE)"},
        {"workspace", 0, true, "workspace the role applies to (repeatable)"},
        {"project", 0, true, "project the role applies to (repeatable)"},
        {"ttl", 0, true, "lifetime (e.g. 24h); none: never expires"}},
       &TokenCreate},
      {"token list", "egsctl token list", "List API tokens (never their secrets)", {}, &TokenList},
      {"token revoke", "egsctl token revoke ID", "Revoke an API token", {}, &TokenRevoke},
      {"config set-server",
       "egsctl config set-server URL",
       "Save the server URL in the config file",
       {},
       &ConfigSetServer},
      {"config set-token",
       "egsctl config set-token TOKEN",
       "Save the token in the config file",
       {},
       &ConfigSetToken},
      {"config set-namespace",
       "egsctl config set-namespace NS",
       "Save the default namespace in the config file",
       {},
       &ConfigSetNamespace},
      {"config view",
       "egsctl config view [--raw]",
       "Show the config file and effective settings",
       {{"raw", 0, false, "show the token"}},
       &ConfigView},
      {"version",
       "egsctl version [--client]",
       "Print the client and server versions",
       {{"client", 0, false, "client version only"}},
       &Version},
  };
}

}  // namespace egs::egsctl
