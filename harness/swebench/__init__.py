"""SWE-bench compatibility: its command-line names (:mod:`.flags`), its output layout and
schema (:mod:`.layout`). Its prebuilt images as an environment source live with the other
image layers (:mod:`harness.engine.prebuilt`); its dataset forms with the inputs
(:mod:`harness.inputs.dataset_sources`)."""
