"""The leaseq dashboard (extra ``web``): ``create_app`` builds a Starlette app.

    from leaseq.web import create_app
    app = create_app(redis.Redis(), allow_actions=False)   # serve with uvicorn, or mount it

``leaseq web`` serves the same app on 127.0.0.1:8080.
"""

from leaseq.web.app import create_app

__all__ = ["create_app"]
