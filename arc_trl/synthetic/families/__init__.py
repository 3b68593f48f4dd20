"""The transformation families. Importing this package registers every family in `arc_trl.synthetic.family.FAMILIES`
(in this order, which is also the round-robin order of `generate_curriculum`)."""

from arc_trl.synthetic.families import geometry, colors, resize, drawing, objects  # noqa: F401, I001
