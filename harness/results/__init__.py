"""The results: what a run or a comparison found, as typed values with provenance.

Made by the harness itself (the node, the driver, ``harness validate``):

    report.py           InstanceResult (report.json) and summarise (summary.json)
    control.py          the facts a run takes from its reference-patch control
    manifest.py         the pinned manifest (manifest.json) and checking a run against one
    validity.py         validity reports from control runs (``harness validate``), pure
    stats/              pure statistics: intervals, paired tests, repeated-attempt aggregates, spreads
    agent_metrics.py    an agent run's metric vector (summary.json's agent block, the pages' Agent section)

Loading (reads what the harness or a vendor wrote; bad input names file and field):

    run_data.py         a run directory -> RunData (one InstanceOutcome with its evidence per instance)
    claims.py           vendor claim files (four formats) -> Claims; validity reports
    instance_detail.py  one instance directory -> InstanceDetail (tests, patch, output, commands, ...)

Analysis (pure functions of loaded data):

    run_report.py       RunData -> RunReport (rates with Wilson intervals, per repository, origins,
                        integrity flags, phase timings, instance rows)
    claims_vs_run.py    -> ClaimsComparison (agreement, McNemar, discordant instances)
    run_vs_run.py       -> RunsComparison (flips, paired bootstrap, per-repository slices)
    comparison.py       the shared result types

Every view in :mod:`harness.views` (JSON, Markdown, HTML) renders these values and
computes nothing of its own, so the three always agree.
"""
