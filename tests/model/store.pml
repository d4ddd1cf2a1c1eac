/* store.pml -- the store's check, the one rule of every fence store
 * (lib/common/rule.c, fence__mark_rule; docs/model.md), for fence.pml and
 * for the harnesses tests/model/test_model.sh generates from
 * tests/common/rule_cases.tsv, one per row, which run this very inline.
 *
 * A resource's mark is a token (0: none yet) and the holder it was
 * admitted for (0: none; holder ids are small numbers here).  A write
 * offering token t as holder h is:
 *   ST_RAISE   t above the mark: admitted, the mark becomes (t, h);
 *   ST_ADMIT   t equal to the mark, from its holder ("none" equals only
 *              "none"): admitted, the mark unchanged;
 *   ST_OLDER   t below the mark: refused;
 *   ST_REPEAT  t equal to the mark, from another holder: refused (one token
 *              issued twice, as after a Redis failover).
 * One statement (a conditional expression), so that a model in which some
 * outcome cannot happen has no unreachable branch because of it. */
#define ST_RAISE  1
#define ST_ADMIT  2
#define ST_OLDER  3
#define ST_REPEAT 4

inline store_rule(smark, smarkh, t, h, out) {
  out = (t > smark -> ST_RAISE : (t < smark -> ST_OLDER : (smarkh == h -> ST_ADMIT : ST_REPEAT)))
}
