// SPDX-License-Identifier: GPL-2.0
/* Netlink attributes. One-line forwards only: see helpers.h. */

#include "helpers.h"

struct nlattr *riw_nla_nest_start_noflag(struct sk_buff *skb, int attrtype)
{
	return nla_nest_start_noflag(skb, attrtype);
}

int riw_nla_nest_end(struct sk_buff *skb, struct nlattr *start)
{
	return nla_nest_end(skb, start);
}

void riw_nla_nest_cancel(struct sk_buff *skb, struct nlattr *start)
{
	nla_nest_cancel(skb, start);
}
