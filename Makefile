# SPDX-License-Identifier: GPL-2.0
# riw: every entry point. The kernel's Kbuild reads ./Kbuild; this file is for people.
#
#   make              build riw.ko against the cached debug kernel (VARIANT=release too)
#   make kernel       build and cache both guest kernels (release and debug)
#   make -s kernel-image    print the path of the VARIANT bzImage
#   make -s module-path     print the path of the VARIANT riw.ko
#   make demo         boot a guest, create riw devices on a veth pair, show ibv_devinfo
#   make check        host unit tests and fuzz smoke, then the guest suite (debug kernel)
#   make check-long   make check with the suites' longer sweeps (RIW_LONG=1)
#   make bench        riw against siw and TCP on the release kernel, tables of ratios
#   make soak         RIW_SOAK_MINUTES (default 30) of mixed traffic on the debug kernel
#   make fuzz         fuzz every protocol parser for FUZZ_SECONDS each (default 300)
#   make deps         install the Debian packages and cargo tools the project needs
#
# Your own kernel (its build tree in KDIR, built with the toolchain it was built with):
#   make modules      riw.ko in this tree, against KDIR
#   make install      modules_install into /lib/modules and depmod, so that
#                     "rdma link add ... type riw" loads riw on demand

VARIANT ?= debug
SHELL := /bin/bash
scripts := $(CURDIR)/scripts
env := . $(scripts)/toolchain.sh

FUZZ_SECONDS ?= 300

KDIR ?= /lib/modules/$(shell uname -r)/build
# Extra variables for the kernel's make, e.g. RUSTC=... BINDGEN=... (LLVM=1 is set).
KMAKE_FLAGS ?=
# Where make install puts modules (empty: /lib/modules).
INSTALL_MOD_PATH ?=

.PHONY: all module kernel kernel-image module-path demo check check-long bench soak fuzz deps \
	clean modules install

all: module

module:
	@$(scripts)/build-module.sh $(VARIANT)

# The kernels' cache key covers the installed toolchain, so install before looking it up.
kernel: deps
	@$(scripts)/build-kernel.sh release
	@$(scripts)/build-kernel.sh debug

kernel-image:
	@$(scripts)/install-deps.sh >&2
	@$(scripts)/build-kernel.sh $(VARIANT) >&2
	@$(env); echo "$$(riw_kernel_dir $(VARIANT))/linux/arch/x86/boot/bzImage"

module-path: module
	@$(env); echo "$$(riw_module_dir $(VARIANT))/riw.ko"

demo:
	@$(scripts)/demo.sh

check:
	@$(scripts)/check.sh

check-long:
	@RIW_LONG=1 $(scripts)/check.sh

bench:
	@$(scripts)/bench.sh

soak:
	@$(scripts)/soak.sh

fuzz:
	@drivers/infiniband/sw/riw/proto/fuzz/run.sh $(FUZZ_SECONDS)

deps:
	@$(scripts)/install-deps.sh

clean:
	@$(env); rm -rf "$$(riw_module_dir $(VARIANT))"

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=1 $(KMAKE_FLAGS) modules

install: modules
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=1 $(KMAKE_FLAGS) INSTALL_MOD_PATH=$(INSTALL_MOD_PATH) \
		modules_install
	depmod -a $(if $(INSTALL_MOD_PATH),-b $(INSTALL_MOD_PATH)) \
		$$($(MAKE) -s -C $(KDIR) kernelrelease)
