// SPDX-License-Identifier: Apache-2.0
/* router: round-robin order, per-Service state kept across snapshots, tried endpoints skipped. */
#include <errno.h>
#include <string.h>

#include "router.h"
#include "tap.h"

static struct service mk(const char *name, struct endpoint *eps, size_t n)
{
	struct service s = {0};

	strcpy(s.name, name);
	s.endpoints = eps;
	s.nendpoints = n;
	return s;
}

int main(void)
{
	struct endpoint eps[3] = {0};
	struct service a = mk("a", eps, 3), b = mk("b", eps, 2), none = mk("none", eps, 0);
	struct router_request rq = {0};
	struct router *r;
	int seq[6], ok = 1, rc;

	rc = router_new("random-ish", &r);
	CHECK_EQ(rc, -EINVAL, "unknown policy refused");
	rc = router_new("round-robin", &r);
	CHECK_EQ(rc, 0, "round-robin router");
	CHECK_STREQ(router_policy(r), "round-robin", "policy name");
	for (int i = 0; i < 6; i++)
		seq[i] = router_pick(r, &a, &rq);
	for (int i = 0; i < 6; i++)
		ok &= seq[i] == i % 3;
	CHECK(ok, "round-robin over 3 endpoints: 0 1 2 0 1 2");
	rc = router_pick(r, &b, &rq);
	CHECK_EQ(rc, 0, "a second service has its own position");
	rc = router_pick(r, &a, &rq);
	CHECK_EQ(rc, 0, "the first one goes on where it was");
	{
		struct service a2 = mk("a", eps, 3); /* same Service in a new snapshot */

		rc = router_pick(r, &a2, &rq);
		CHECK_EQ(rc, 1, "position kept across a reload (by name)");
	}
	rq.tried = 1ULL << 2;
	rc = router_pick(r, &a, &rq);
	CHECK_EQ(rc, 0, "tried endpoint 2 skipped");
	rq.tried = 7;
	rc = router_pick(r, &a, &rq);
	CHECK_EQ(rc, -ENOENT, "all tried: none left");
	rq.tried = 0;
	rc = router_pick(r, &none, &rq);
	CHECK_EQ(rc, -ENOENT, "no endpoints: none");
	rc = router_pick(r, NULL, &rq);
	CHECK_EQ(rc, -ENOENT, "no service: none");
	router_free(r);
	return tap_done();
}
