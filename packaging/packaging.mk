# Packaging for AWX / Automation Platform (included by the Makefile: `include packaging/packaging.mk`).
#
#   make collection   build/ansible_collections/fleetnap/power/ and build/fleetnap-power-<version>.tar.gz
#   make ee-context   build/ee-context/ (Containerfile + _build/ with the tarball), for
#                     `podman build -t fleetnap-ee build/ee-context` on a machine with a container runtime

.PHONY: collection ee-context

COLLECTION_SOURCES := $(wildcard library/*.py module_utils/fleetnap/*.py doc_fragments/*.py lookup_plugins/*.py) \
	$(shell find roles playbooks -type f -not -path '*/__pycache__/*' 2>/dev/null) \
	$(wildcard packaging/galaxy.yml packaging/meta/*.yml packaging/bindep.txt packaging/CHANGELOG.md packaging/build_collection.py)

# The version is set once, in packaging/galaxy.yml.
COLLECTION_VERSION := $(shell sed -n 's/^version: *//p' packaging/galaxy.yml)
COLLECTION_TARBALL := build/fleetnap-power-$(COLLECTION_VERSION).tar.gz

collection: $(COLLECTION_TARBALL)
$(COLLECTION_TARBALL): $(COLLECTION_SOURCES) | $(VENV)/.stamp
	$(BIN)/python packaging/build_collection.py --out build/ansible_collections/fleetnap/power --dist build

ee-context: collection
	rm -rf build/ee-context
	$(BIN)/ansible-builder create -f packaging/execution-environment.yml -c build/ee-context --output-filename Containerfile
	@ls build/ee-context/_build/fleetnap-collection/fleetnap-power-*.tar.gz >/dev/null
	@echo "build context: build/ee-context (podman build -t fleetnap-ee build/ee-context)"
