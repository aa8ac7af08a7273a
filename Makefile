# SPDX-License-Identifier: Apache-2.0
# kvsplice build. Outputs go to $(BUILD)/ (build/ by default, build-asan/ for `make asan`).
# `make V=1` shows the full commands.
#
# Layout it discovers by itself, so a new module needs no edit here:
#   userspace/LAYER/*.c (but daemon/main.c) -> $(BUILD)/libkvs.a, linked into everything
#   userspace/daemon/main.c     -> $(BUILD)/kvsplice
#   tools/NAME/*.c              -> $(BUILD)/NAME        (kvsim, kvbench, kvtok, kvref)
#   bench/NAME/*.c              -> $(BUILD)/bench/NAME
#   bpf/*.bpf.c                 -> $(BUILD)/bpf/*.bpf.o and *.skel.h
#   tests/unit/test_*.c         -> $(BUILD)/tests/test_*
#   tests/fuzz/fuzz_*.c         -> $(BUILD)/fuzz/fuzz_*  (clang, libFuzzer + ASan)

.DELETE_ON_ERROR:
.SUFFIXES:
.SECONDARY:
.DEFAULT_GOAL := all

BUILD    ?= build
CC       := gcc
CLANG    := clang
BPFTOOL  ?= bpftool
OPT      ?= -O2
ARCH     := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
# Parallel builds for `make test` and `make demo` (one job per core).
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-7s %s\n' '$(1)' '$(2)';
endif

CPPFLAGS := -D_GNU_SOURCE -Iuserspace -Itests/lib -Ibpf -I$(BUILD)/bpf
CFLAGS   := -std=gnu11 -g $(OPT) -Wall -Wextra -Werror -Wno-unused-parameter -MMD -MP
LDLIBS   := -lbpf -lelf -lz -lzmq -lcjson -lmsgpackc -lxxhash -lcurl -lcrypto -lpthread -lm

LIB_SRCS   := $(filter-out userspace/daemon/main.c,$(wildcard userspace/*/*.c))
LIB_OBJS   := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
LIB        := $(BUILD)/libkvs.a
BPF_SRCS   := $(wildcard bpf/*.bpf.c)
BPF_OBJS   := $(BPF_SRCS:bpf/%.bpf.c=$(BUILD)/bpf/%.bpf.o)
BPF_SKELS  := $(BPF_SRCS:bpf/%.bpf.c=$(BUILD)/bpf/%.skel.h)
TOOLS      := $(sort $(patsubst tools/%/,%,$(dir $(wildcard tools/*/*.c))))
BENCHES    := $(sort $(patsubst bench/%/,%,$(dir $(wildcard bench/*/*.c))))
UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_SRCS  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS  := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/%)
KVSPLICE   := $(if $(wildcard userspace/daemon/main.c),$(BUILD)/kvsplice)

.PHONY: all deps test tests asan fuzz bench demo clean format format-list reference image image-clean
all: $(KVSPLICE) $(TOOLS:%=$(BUILD)/%) $(BENCHES:%=$(BUILD)/bench/%) $(BPF_OBJS)

# Every Debian and npm package the build, tests and demo need; idempotent and quiet.
deps:
	$(Q)bash tools/deps.sh

# Test binaries: the unit tests are built twice, plain and with sanitizers (run from build-asan/).
tests: all $(UNIT_BINS)
fuzz: $(FUZZ_BINS)

asan:
	$(Q)$(MAKE) --no-print-directory BUILD=build-asan \
		OPT='-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined' \
		tests

# `make test` runs everything and ends with `N passed, N failed`. `make test T=word` runs only the
# test files whose name contains word.
test: deps
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) tests fuzz
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) asan
	$(Q)bash tests/run.sh $(T)

# `make demo QUICK=1`: two points, fewer requests (about a minute).
demo: deps
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) all
	$(Q)QUICK=$(QUICK) bash tests/node/demo.sh

bench: all

# The image of deploy/Dockerfile, built with podman from Debian's mirror (no Docker engine, no
# registry): tools/image.sh. Opt-in (podman, runc, mmdebstrap, a few hundred MB of packages);
# `make test` then runs tests/node/test_image.sh against it (skipped without it).
image:
	$(Q)bash tools/image.sh build
image-clean:
	$(Q)bash tools/image.sh clean

# Every C source but the generated Unicode tables (tools/unicode/gen_tables.mjs writes them).
# `make format` rewrites them with .clang-format; tests/style/test_format.sh fails on any that
# differs.
FORMAT_SRCS = $(filter-out userspace/prompt/unicode_tables.%,$(wildcard userspace/*/*.[ch] tools/*/*.[ch] \
	bench/*/*.[ch] tests/*/*.[ch] bpf/*.[ch]))
format:
	$(Q)clang-format -i $(FORMAT_SRCS)
format-list:
	@echo $(FORMAT_SRCS)

# docs/reference/PAGE.md for every page build/kvref lists (`kvref --list`), printed from the
# tables the daemon itself uses; tests/style/test_reference.sh fails on a page that differs.
reference: $(BUILD)/kvref
	$(Q)mkdir -p docs/reference
	$(Q)for p in $$($(BUILD)/kvref --list); do \
		printf '  %-7s %s\n' GEN docs/reference/$$p.md; \
		$(BUILD)/kvref $$p >docs/reference/$$p.md.tmp && mv docs/reference/$$p.md.tmp docs/reference/$$p.md || exit 1; \
	done

clean:
	$(Q)rm -rf build build-asan

# Helpers of the netns node testbed: tests/node/NAME.c -> $(BUILD)/tests/node/NAME
NODE_SRCS := $(wildcard tests/node/*.c)
tests: $(NODE_SRCS:tests/node/%.c=$(BUILD)/tests/node/%)
$(BUILD)/tests/node/%: $(BUILD)/obj/tests/node/%.o $(LIB)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# --- BPF -------------------------------------------------------------------------------------
$(BUILD)/bpf/vmlinux.h:
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(BUILD)/bpf/vmlinux.h $(wildcard bpf/*.h)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -target bpf -D__TARGET_ARCH_$(ARCH) -g -O2 -Wall -Werror -Ibpf -I$(BUILD)/bpf -c $< -o $@

$(BUILD)/bpf/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

# --- userspace -------------------------------------------------------------------------------
$(BUILD)/obj/%.o: %.c | $(BPF_SKELS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^

$(BUILD)/kvsplice: $(BUILD)/obj/userspace/daemon/main.o $(LIB)
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# kvref prints the flags reference from kvbench's and kvsim's option tables too.
TOOL_EXTRA_kvref := $(BUILD)/obj/tools/kvbench/opts.o $(BUILD)/obj/tools/kvbench/convo.o $(BUILD)/obj/tools/kvbench/trace.o $(BUILD)/obj/tools/kvsim/opts.o
define tool_rule
$(BUILD)/$(1): $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tools/$(1)/*.c)) $(TOOL_EXTRA_$(1)) $(LIB)
	$$(call msg,LD,$$@)
	$$(Q)$$(CC) $$(CFLAGS) $$^ $$(LDLIBS) -o $$@
endef
$(foreach t,$(TOOLS),$(eval $(call tool_rule,$(t))))

# bench/fleet runs kvsim's block pool and KV event publisher.
BENCH_EXTRA_fleet := $(BUILD)/obj/tools/kvsim/kvcache.o $(BUILD)/obj/tools/kvsim/kvevents.o
define bench_rule
$(BUILD)/bench/$(1): $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard bench/$(1)/*.c)) $(BENCH_EXTRA_$(1)) $(LIB)
	$$(call msg,LD,$$@)
	$$(Q)mkdir -p $$(@D)
	$$(Q)$$(CC) $$(CFLAGS) $$^ $$(LDLIBS) -o $$@
endef
$(foreach b,$(BENCHES),$(eval $(call bench_rule,$(b))))

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIB)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# Fuzz targets: the library rebuilt with clang's libFuzzer instrumentation. Worker tables hold 16
# workers, not 1024 (no target has more than 2): fuzz_proxy makes a router per input, and ASan
# poisoning and unmapping the 1 MiB approximate-view table sized for 1024 cost more than the rest
# of an input.
FUZZ_CFLAGS := -std=gnu11 -g -O1 -fsanitize=fuzzer-no-link,address,undefined -Wall -Wextra -Werror -Wno-unused-parameter \
	-DWORKERS_MAX=16
FUZZ_OBJS   := $(LIB_SRCS:%.c=$(BUILD)/fuzzobj/%.o)
$(BUILD)/fuzzobj/%.o: %.c | $(BPF_SKELS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(CPPFLAGS) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_OBJS)
	$(call msg,FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer $^ $(LDLIBS) -o $@

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
