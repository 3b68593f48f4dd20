"""Code that runs inside the sandbox processes (the zygote and the session children).

These modules import only the standard library and numpy, and import each other as top-level modules (`import wire`),
because the zygote is started as a plain script in an isolated interpreter (`python -I .../zygote.py`). The trainer
imports `arc_trl.sandbox.child.wire` for the message format; nothing else here is meant to be imported by it.
"""
