// SPDX-License-Identifier: Apache-2.0
// nodesetup: --node-address parsing as a table of {input, expected, description}, and the probe's
// refusals that need no privilege (a --cgroup and a --pin-dir on the wrong filesystem: counted,
// the first one's reason kept for /readyz). The rtnetlink part runs in tests/node/test_nodesetup.sh
// (a real kernel, in a network namespace of its own).
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "node/nodesetup.h"
#include "tap.h"

struct addr_case {
	const char *in;
	int rc;		 /* 0 or -EINVAL */
	const char *ip;	 /* when rc == 0 */
	int prefix;	 /* when rc == 0 */
	const char *why; /* description */
};

static const struct addr_case addr_cases[] = {
    {"169.254.20.11", 0, "169.254.20.11", 32, "no prefix: /32"},
    {"169.254.20.11/32", 0, "169.254.20.11", 32, "explicit /32"},
    {"10.0.0.1/8", 0, "10.0.0.1", 8, "a shorter prefix"},
    {"169.254.20.11/0", -EINVAL, NULL, 0, "prefix 0 refused"},
    {"169.254.20.11/33", -EINVAL, NULL, 0, "prefix 33 refused"},
    {"169.254.20.11/", -EINVAL, NULL, 0, "empty prefix refused"},
    {"169.254.20.11/3x", -EINVAL, NULL, 0, "trailing junk in the prefix refused"},
    {"0.0.0.0", -EINVAL, NULL, 0, "the unspecified address refused"},
    {"", -EINVAL, NULL, 0, "empty refused"},
    {"/32", -EINVAL, NULL, 0, "no address refused"},
    {"169.254.20", -EINVAL, NULL, 0, "three octets refused"},
    {"::1", -EINVAL, NULL, 0, "IPv6 refused"},
    {"169.254.020.011.1/32", -EINVAL, NULL, 0, "too long refused"},
};

static void test_parse_address(void)
{
	for (size_t i = 0; i < sizeof(addr_cases) / sizeof(addr_cases[0]); i++) {
		const struct addr_case *c = &addr_cases[i];
		struct in_addr a = {0};
		char s[INET_ADDRSTRLEN] = "";
		int prefix = -1, rc = nodesetup_parse_address(c->in, &a, &prefix);

		inet_ntop(AF_INET, &a, s, sizeof(s));
		CHECK(rc == c->rc && (rc || (strcmp(s, c->ip) == 0 && prefix == c->prefix)),
		      "parse \"%s\": %s (rc %d, %s/%d)", c->in, c->why, rc, s, prefix);
	}
}

static void test_probe_refusals(void)
{
	struct nodesetup_probe_cfg cfg = {.cgroup = "/proc", .pin_dir = "/proc/kvsplice-pins"};
	char cg[256] = "", why[256] = "";
	int n = nodesetup_probe(&cfg, cg, sizeof(cg), why, sizeof(why));

	CHECK(n >= 2, "a --cgroup and a --pin-dir on procfs: at least 2 missing things (%d)", n);
	CHECK(strstr(why, "--cgroup /proc is not a cgroup v2 directory") == why,
	      "the first one is kept for /readyz: %s", why);
	CHECK_STREQ(cg, "/proc", "the given --cgroup is returned as the attach point");
}

int main(void)
{
	test_parse_address();
	test_probe_refusals();
	return tap_done();
}
