#!/usr/bin/env python3
"""Regenerates the vendored Kubernetes JSON schemas kubeconform reads here.

Source: the PyPI package kubernetes-validate (Apache-2.0), which ships the
JSON schemas generated from Kubernetes' OpenAPI spec for each release, in a
"local-strict" form (additionalProperties: false, definitions in one shared
_definitions.json). This script turns the few kinds Laneway's manifests use
into kubeconform's "standalone-strict" layout: one file per kind, holding
only the definitions that kind reaches, refs rewritten to #/$defs/...

    pip download --no-deps kubernetes-validate==1.37.0 -d /tmp/kv
    python3 generate.py /tmp/kv/kubernetes_validate-1.37.0-py3-none-any.whl

Add a kind to KINDS when the manifests start using it.
"""
import json
import os
import sys
import zipfile

VERSIONS = ["v1.30.0", "v1.37.0"]  # oldest and newest release the package ships
KINDS = [
    "configmap-v1",
    "secret-v1",
    "service-v1",
    "namespace-v1",
    "statefulset-apps-v1",
    "poddisruptionbudget-policy-v1",
    "ingress-networking-v1",
    "networkpolicy-networking-v1",
]
SHARED = "/api/_definitions.json#/$defs/"


def refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            else:
                yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)


def rewrite(node):
    if isinstance(node, dict):
        return {k: (v.replace(SHARED, "#/$defs/") if k == "$ref" and isinstance(v, str) else rewrite(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [rewrite(v) for v in node]
    return node


def main(wheel):
    here = os.path.dirname(os.path.abspath(__file__))
    z = zipfile.ZipFile(wheel)
    prefix = "kubernetes_validate/kubernetes-json-schema/"
    for version in VERSIONS:
        src = prefix + version + "-local-strict/"
        defs = json.loads(z.read(src + "_definitions.json"))["$defs"]
        out_dir = os.path.join(here, version + "-standalone-strict")
        os.makedirs(out_dir, exist_ok=True)
        for kind in KINDS:
            schema = rewrite(json.loads(z.read(src + kind + ".json")))
            schema.pop("$id", None)
            needed, todo = {}, [r for r in refs(schema)]
            while todo:
                ref = todo.pop()
                if not ref.startswith("#/$defs/"):
                    raise SystemExit(f"{kind}: unexpected $ref {ref}")
                name = ref[len("#/$defs/"):]
                if name in needed:
                    continue
                needed[name] = defs[name]
                todo.extend(refs(defs[name]))
            schema["$defs"] = dict(sorted(needed.items()))
            with open(os.path.join(out_dir, kind + ".json"), "w") as f:
                json.dump(schema, f, separators=(",", ":"), sort_keys=True)
                f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
