"""Answer preference sessions in a browser: ``botorch-pref serve study.db``.

An ASGI application (Starlette, served by uvicorn; the ``[web]`` extra) on top of
:mod:`botorch_pref.sessions`: one answer link per session (:mod:`botorch_pref.sessions.answer_links`
keeps them as hashes, rebuilt from the link key beside the database, with the admin token and
each page's settings), each carrying its own capability
token; an admin page (admin token) to create sessions, hand out, rotate and revoke their links,
follow their progress, see the results and download the exports. Modules:

* :mod:`~botorch_pref.web.app` — :func:`~botorch_pref.web.app.create_app`: the routes, error
  pages and lifespan;
* :mod:`~botorch_pref.web.answering`, :mod:`~botorch_pref.web.admin` and
  :mod:`~botorch_pref.web.results` — the routes of the answering page, of the admin page and of
  the results view;
* :mod:`~botorch_pref.web.server_state` — what the routes share: settings, tokens, nonces, checks;
* :mod:`~botorch_pref.web.workers` and :mod:`~botorch_pref.web.held` — query preparation off
  the request path, in worker processes that hold the sessions' models;
* :mod:`~botorch_pref.web.batching` — the next queries of several sessions in one batched step
  of the loop, for the workers;
* :mod:`~botorch_pref.web.renderers` and :mod:`~botorch_pref.web.colour` — drawing options;
* :mod:`~botorch_pref.web.nonces` — single-use form nonces, signed so they outlive a restart;
* :mod:`~botorch_pref.web.security` — body limit and security headers;
* :mod:`~botorch_pref.web.plots` — the results view's pictures;
* :mod:`~botorch_pref.web.colour_demo` and :mod:`~botorch_pref.web.serve_command` —
  ``botorch-pref serve``.
"""
