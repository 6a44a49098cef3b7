"""judgeblender as a long-running service (issue 33), behind the `[serve]` extra.

`judgeblender serve` puts a judge or a panel behind HTTP (`app.py`: POST /v1/judge and the rest);
`judgeblender proxy` is an OpenAI-compatible caching proxy in front of a served model, keeping
its answers in a judgeblender store (`proxy.py`); `jb.Client` talks to `serve` from Python
(`client.py`). Each keeps the CLI's guarantees: nothing counted before it is committed, no
silent label, no secret written, one clear error per bad request. docs/serve.md.
"""
