"""The ``haggler`` command."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional, Sequence, TypeVar
from urllib.parse import urlsplit

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from haggler.catalog import CatalogError, load_catalog
from haggler.llm.base import LLMBackend
from haggler.llm.choice import DEFAULT_TOKEN_BUDGET
from haggler.money import decimal_string, format_money
from haggler.protocols.market.settings import MarketSettings
from haggler.protocols.matching.settings import MatchingSettings
from haggler.server.config import DEFAULT_DATA_DIR, DEFAULT_DB_URL
from haggler.server.limits import ClientLimits
from haggler.storage.database import DEFAULT_DB_TIMEOUT
from haggler.timestamps import utc_z

if TYPE_CHECKING:
    from haggler.payments.stripe_handler import StripeHandler

app = typer.Typer(help="haggler: negotiable stores and shopper agents (negotiate.v1).", no_args_is_help=True,
                  add_completion=False)
#: Errors and start-up lines. soft_wrap: Rich never breaks a line of its own (piped, it would at
#: 80 columns, splitting a message that scripts grep); a terminal still wraps what is too wide.
err = Console(stderr=True, soft_wrap=True)


def _print_version(value: bool) -> None:
    if value:
        from haggler import __version__

        typer.echo(f"haggler {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True, help="Print haggler's version and exit.")] = False) -> None:
    """The options of ``haggler`` itself (the app's help text is the Typer's, above)."""


def _fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``message`` as an error, as written: square brackets in it ("pip install
    'haggler[llm]'", a product id, a store's words) are text, not console markup, and its lines
    are not broken at the console's width (a catalog's problems stay one per line, for grep)."""
    err.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(code=code)


_MATCHING_DEFAULTS = MatchingSettings()
#: MatchingSettings' field names as ``serve`` spells them, for its error messages.
_MATCHING_OPTIONS = {"claim_timeout_seconds": "--claim-timeout", "parked_timeout_seconds": "--parked-timeout",
                     "negotiation_timeout_seconds": "--negotiation-timeout", "the operator token": "--operator-token",
                     "v2_ask_user_window_seconds": "--v2-ask-user-window", "v2_deadlock_threshold": "--v2-deadlock-threshold",
                     "v2_wall_clock_seconds": "--v2-wall-clock", "protocol_version": "--negotiation-protocol"}


def matching_settings(operator_token: str | None, claim_timeout: int, parked_timeout: int,
                      negotiation_timeout: int, **v2_options: Any) -> MatchingSettings:
    """``serve``'s matching options as settings; a bad value is a ValueError naming the option.
    ``v2_options``: MatchingSettings' Negotiations v2 fields (``protocol_version``, ``v2_screen``...)."""
    try:
        return MatchingSettings(operator_token=operator_token or None, claim_timeout_seconds=claim_timeout,
                                parked_timeout_seconds=parked_timeout, negotiation_timeout_seconds=negotiation_timeout,
                                **v2_options)
    except ValueError as exc:
        message = str(exc)
        for name, option in _MATCHING_OPTIONS.items():
            message = message.replace(name, option)
        raise ValueError(message) from None


_MARKET_DEFAULTS = MarketSettings()
_CLIENT_DEFAULTS = ClientLimits()


def market_settings(offer_turn_cap: int, clear_interval: float, deal_expiry: int) -> MarketSettings:
    """``serve``'s market options as settings (0 switches the cap and the clearing off); a bad
    value is a ValueError naming the option."""
    if offer_turn_cap < 0 or clear_interval < 0:
        raise ValueError("--offer-turn-cap and --clear-interval must not be negative (0 switches them off)")
    try:
        return MarketSettings(offer_turn_cap=offer_turn_cap or None, clear_interval_seconds=clear_interval or None,
                              deal_expiry_seconds=deal_expiry)
    except ValueError as exc:
        raise ValueError(str(exc).replace("offer_turn_cap", "--offer-turn-cap").replace("None (no cap)", "0 (no cap)")
                         .replace("deal_expiry_seconds", "--deal-expiry")) from None


#: The options every command that can run an agent on a model takes (``serve``'s merchant,
#: ``shop``, ``match agent``, ``market demo``); see docs/llm.md.
LLMProvider = Annotated[Optional[str], typer.Option(
    "--llm-provider", help="Run the agent on a model: anthropic, or openai (also any OpenAI-compatible server "
    "with --llm-base-url). Key: ANTHROPIC_API_KEY or OPENAI_API_KEY. Needs pip install 'haggler\\[llm]'.")]
LLMModel = Annotated[Optional[str], typer.Option(
    "--llm-model", help="The model's name at that provider, e.g. a Claude or GPT model, or llama3.1 on Ollama.")]
LLMBaseURL = Annotated[Optional[str], typer.Option(
    "--llm-base-url", help="An OpenAI-compatible server (vLLM, llama.cpp, Ollama: http://127.0.0.1:11434/v1) "
    "or a proxy; default: the provider's API.")]
LLMTokenBudget = Annotated[int, typer.Option(
    "--llm-token-budget", help="Tokens one negotiation may spend on the model; then the deterministic agent "
    "finishes it (0: no limit).")]
LLMTimeout = Annotated[float, typer.Option(
    "--llm-timeout", help="Seconds one model call may take before the deterministic agent takes the turn.")]
LLMPrices = Annotated[Optional[str], typer.Option(
    "--llm-prices", help="The model's prices in USD per million input and output tokens, e.g. 3,15: "
    "each negotiation's cost is counted with them (default: tokens only).")]


def llm_backend(provider: str | None, model: str | None, base_url: str | None, timeout: float,
                prices: str | None = None) -> LLMBackend | None:
    """The model an agent runs on, from the ``--llm-*`` options: None for the deterministic agent;
    a missing extra, key or option stops the command with a message naming them."""
    from haggler.llm import LLMSetupError
    from haggler.llm.choice import backend_for_options, parse_prices

    try:
        return backend_for_options(provider, model, base_url=base_url, timeout=timeout,
                                   prices=parse_prices(prices) if prices else None)
    except LLMSetupError as exc:
        raise _fail(str(exc)) from None


@app.command()
def serve(
    catalog: Annotated[Optional[Path], typer.Option(help="Catalog JSON file (default: the built-in demo store).")] = None,
    strict_catalog: Annotated[bool, typer.Option(
        help="Refuse a catalog field haggler does not read (a typo such as 'levrs'); with --no-strict-catalog "
             "such fields are kept hidden and listed as warnings. Fields named x_... are always allowed.")] = True,
    db: Annotated[str, typer.Option(help="Database URL: sqlite:///file.db or postgresql://user@host/db.")] = DEFAULT_DB_URL,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    public_url: Annotated[Optional[str], typer.Option(help="Public base URL for absolute links (default: each request's own).")] = None,
    trusted_proxy: Annotated[Optional[list[str]], typer.Option(help="CIDR of a reverse proxy whose X-Forwarded-For is believed (repeatable).")] = None,
    allowed_host: Annotated[Optional[list[str]], typer.Option(help="A host the store answers to: NAME (any port) or NAME:PORT; requests for any other Host (or X-Forwarded-Host from a trusted proxy) get 400 (repeatable; default: the host of --public-url, else localhost, 127.0.0.1 and [::1]).")] = None,
    max_chat_starts_per_hour: Annotated[int, typer.Option(
        help="Chats one client address may start per hour (clients on this machine are exempt unless "
             "--limit-loopback).")] = 8,
    limit_loopback: Annotated[bool, typer.Option(
        help="Hold clients on this machine (loopback, after --trusted-proxy resolution) to "
             "--max-chat-starts-per-hour, --max-registrations-per-hour, --max-agent-messages-per-hour and "
             "--max-contacts-per-hour too; by default they are exempt, so local tests and demos are "
             "not locked out.")] = False,
    max_wrong_tokens: Annotated[int, typer.Option(
        help="Wrong operator tokens or agent keys one client address may send in 15 minutes, on every route "
             "together; past it wrong ones get 429 (the right token is always let through).")]
        = _CLIENT_DEFAULTS.max_wrong_tokens,
    max_registrations_per_hour: Annotated[int, typer.Option(
        help="Agents one client address may register per hour, on /v1/agents and /market/agents together.")]
        = _CLIENT_DEFAULTS.max_registrations_per_hour,
    max_agent_messages_per_hour: Annotated[int, typer.Option(
        help="/market messages to other agents (contact requests, agreements, sealed bids, offers, instant "
             "matches) one client address may send per hour.")] = _CLIENT_DEFAULTS.max_agent_messages_per_hour,
    max_contacts_per_hour: Annotated[int, typer.Option(
        help="/market contact requests one agent may send, and one agent's inbox may receive, per hour "
             "(past it refused with 429; the market's own notices are never limited).")]
        = _CLIENT_DEFAULTS.max_contacts_per_hour,
    max_messages_per_chat: Annotated[int, typer.Option(help="Shopper messages per chat; the merchant wraps up at the last.")] = 30,
    idle_ttl: Annotated[int, typer.Option(help="Seconds of inactivity after which a chat closes.")] = 3600,
    max_message_length: Annotated[int, typer.Option(help="Longest shopper message, in characters.")] = 2000,
    seed: Annotated[Optional[int], typer.Option(help="Fixed seed: conversations become reproducible.")] = None,
    floor_margin: Annotated[float, typer.Option(help="The merchant sells no lower than its floor plus a secret share "
                                                     "of (list price - floor), up to this fraction of it, so that no "
                                                     "shopper can find the floor by probing (0 to 0.5; 0: off).")] = 0.05,
    data_dir: Annotated[Path, typer.Option(help="Directory for the store's signing key: audit trails, UCP webhooks (created 0700).")] = DEFAULT_DATA_DIR,
    session_ttl: Annotated[int, typer.Option(help="agents.json session lifetime in seconds (hard deadline, >= 60).")] = 1800,
    max_sessions: Annotated[int, typer.Option(help="Concurrent agents.json sessions per client.")] = 5,
    requests_per_minute: Annotated[int, typer.Option(help="agents.json requests per client per minute.")] = 60,
    audit: Annotated[bool, typer.Option(help="Produce signed audit trails of agents.json sessions.")] = True,
    sandbox_deposits: Annotated[bool, typer.Option(
        "--sandbox-deposits", help="Let exchange agents fund their wallets out of thin air with POST "
        "/v1/wallets/me/deposit: a sandbox feature, never for production (off: 403).")] = False,
    operator_token: Annotated[Optional[str], typer.Option(
        envvar="HAGGLER_OPERATOR_TOKEN", show_envvar=True,
        help="The operator's token: it opens the /admin dashboard and is the Bearer token of the operator "
             "routes under /api and /market (at least 16 characters; without it they all answer 403).")] = None,
    claim_timeout: Annotated[int, typer.Option(
        help="Seconds a personal agent may hold a picked-up turn before it returns to the queue.")]
        = _MATCHING_DEFAULTS.claim_timeout_seconds,
    parked_timeout: Annotated[int, typer.Option(
        help="Seconds a parked turn waits for its personal agent before the system negotiator takes it.")]
        = _MATCHING_DEFAULTS.parked_timeout_seconds,
    negotiation_timeout: Annotated[int, typer.Option(
        help="Seconds a negotiation between two personal agents may run before it ends as stalled.")]
        = _MATCHING_DEFAULTS.negotiation_timeout_seconds,
    negotiation_protocol: Annotated[str, typer.Option(
        envvar="HAGGLER_NEGOTIATION_PROTOCOL", show_envvar=True,
        help="The protocol of fresh match negotiations: v1, or v2 (Index Network's seats); a continuation "
             "keeps its predecessor's. See docs/matching-api.md, Negotiations v2.")]
        = _MATCHING_DEFAULTS.protocol_version,
    v2_screen: Annotated[bool, typer.Option(
        help="v2: screen each outreach before its first turn (a pass ends it screened_out).")]
        = _MATCHING_DEFAULTS.v2_screen,
    v2_ask_user: Annotated[bool, typer.Option(
        help="v2: let a personal agent pause once to ask its own user (input_required).")]
        = _MATCHING_DEFAULTS.v2_ask_user,
    v2_ask_user_window: Annotated[int, typer.Option(
        help="v2: seconds a user has to answer an ask_user before the conservative default applies.")]
        = _MATCHING_DEFAULTS.v2_ask_user_window_seconds,
    v2_deadlock: Annotated[bool, typer.Option(
        help="v2: deadlock detection (a run of counters/questions puts system turns in a bargaining stance).")]
        = _MATCHING_DEFAULTS.v2_deadlock,
    v2_deadlock_threshold: Annotated[int, typer.Option(
        help="v2: how many counters/questions in a row make a deadlock (at least 2).")]
        = _MATCHING_DEFAULTS.v2_deadlock_threshold,
    v2_wall_clock: Annotated[int, typer.Option(
        help="v2: seconds an uncapped negotiation may run before it ends stalled (reason timeout).")]
        = _MATCHING_DEFAULTS.v2_wall_clock_seconds,
    offer_turn_cap: Annotated[int, typer.Option(
        help="Offers after which a /market natural-language negotiation ends without a deal (0: no cap).")]
        = _MARKET_DEFAULTS.offer_turn_cap or 0,
    clear_interval: Annotated[float, typer.Option(
        help="Seconds between scheduled clearings of every /market order book (0: clear only on request).")] = 0,
    deal_expiry: Annotated[int, typer.Option(
        help="Seconds a /market deal may wait for its signatures or an owner's approval before it expires "
             "and its listing is released (at least 1).")] = _MARKET_DEFAULTS.deal_expiry_seconds,
    merchant_mode: Annotated[str, typer.Option(
        "--merchant", help="How the merchant runs: deterministic (no model), llm-voice (it decides, a model words "
        "the replies from public facts) or llm (a model proposes moves within the guards); see docs/llm.md.")] = "deterministic",
    merchant_skill: Annotated[Optional[Path], typer.Option(
        help="A merchant skill (SKILL.md or a directory holding one): the llm merchant's instructions; "
        "its name and description are published as merchant_skill.")] = None,
    llm_provider: LLMProvider = None,
    llm_model: LLMModel = None,
    llm_base_url: LLMBaseURL = None,
    llm_token_budget: LLMTokenBudget = 40_000,
    llm_timeout: LLMTimeout = 20.0,
    llm_prices: LLMPrices = None,
    db_timeout: Annotated[float, typer.Option(
        help="Seconds a request may wait on the database (a lock another session holds, a statement, a "
             "connection) before it is answered 503 with Retry-After and rolled back.")] = DEFAULT_DB_TIMEOUT,
    access_log: Annotated[str, typer.Option(
        help="json: one JSON line per request on standard output (time, request_id, method, route, status, "
             "duration_ms, client); off: none (uvicorn's own access log is off either way).")] = "json",
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    workers: Annotated[int, typer.Option(
        min=1, help="Worker processes serving the port, each with its own database connections; a dead one is "
        "replaced. More than one needs PostgreSQL (see docs/deploy.md).")] = 1,
    simulation_secret: Annotated[Optional[str], typer.Option(
        envvar="HAGGLER_SIMULATION_SECRET", show_envvar=True,
        help="Test stores only: offer UCP's simulated payment handler (it takes no money) and "
        "POST /testing/simulate-shipping/{order_id} to callers sending this in Simulation-Secret "
        "(at least 8 characters). Never on a store that takes real orders.")] = None,
    acp_api_key: Annotated[Optional[str], typer.Option(
        envvar="HAGGLER_ACP_API_KEY", show_envvar=True,
        help="Serve ACP checkout (/checkout_sessions, /.well-known/acp.json) to agents presenting this key as "
        "their Bearer token (at least 16 characters). Set it in the environment rather than here, where "
        "other users of the machine can read it. Without it the store does not serve ACP.")] = None,
    acp_webhook_url: Annotated[Optional[str], typer.Option(
        envvar="HAGGLER_ACP_WEBHOOK_URL", show_envvar=True,
        help="With ACP: the agent platform's order webhook receiver; every order placed through ACP is sent "
        "there as order_create, signed (Merchant-Signature) with the secret in HAGGLER_ACP_WEBHOOK_SECRET, "
        "which is read from the environment only.")] = None,
    mail_from: Annotated[Optional[str], typer.Option(
        envvar="HAGGLER_MAIL_FROM", show_envvar=True,
        help="With an SMTP server in HAGGLER_SMTP_URL (read from the environment only: it holds the password; "
        "smtp://, smtps:// or smtp+plain://user:password@host:port): the address buyers' order confirmations "
        "are sent from. Every order with a buyer's email gets one, whatever door it came through.")] = None,
    checkout_counter_offers: Annotated[bool, typer.Option(
        help="Answer a UCP or ACP cancel over price (intent_trace.reason_code price_sensitivity) with the "
        "merchant agent's counter-offer, a deal code for a new checkout (docs/checkout.md).")] = True,
    stripe_return_url: Annotated[Optional[str], typer.Option(
        envvar="HAGGLER_STRIPE_RETURN_URL", show_envvar=True,
        help="With a Stripe key (HAGGLER_STRIPE_API_KEY, read from the environment only): the page Stripe sends "
        "an ACP buyer back to after 3-D Secure, an absolute http(s) URL (UCP buyers come back to the store's own "
        "page). With it such a card holds an ACP checkout and sends the buyer to Stripe; without it only an "
        "agent that runs 3-D Secure itself can pay with one.")] = None,
    stripe_account: Annotated[Optional[str], typer.Option(
        envvar="HAGGLER_STRIPE_ACCOUNT", show_envvar=True,
        help="With a Stripe key: the Stripe account id (acct_...) UCP and ACP publish, so that agents scope "
        "their payment tokens to this store (default: asked of Stripe at start-up).")] = None,
) -> None:
    """Serve a negotiable store (negotiate.v1, agents.json and the /v1 transactions exchange) — by default the
    built-in demo store. With HAGGLER_STRIPE_API_KEY in the environment its UCP and ACP checkouts take
    payments through Stripe (docs/payments.md)."""
    import uvicorn

    from haggler.order_mail import MailSettings
    from haggler.protocols.acp.settings import AcpSettings
    from haggler.protocols.agents_json.settings import AgentsSettings
    from haggler.protocols.negotiate_v1.settings import MerchantSettings, StoreLimits, load_skill
    from haggler.protocols.transactions.settings import ExchangeSettings
    from haggler.protocols.ucp.settings import UcpSettings
    from haggler.server.app import create_app
    from haggler.server.clientip import parse_networks
    from haggler.server.config import StoreConfig
    from haggler.server.hosts import WILDCARD_HOSTS, AllowedHosts, browsable_base
    from haggler.server.coalescing import CoalescingHttpToolsProtocol
    from haggler.server.workers import serve_workers
    from haggler.storage.database import DatabaseError, normalize_url, open_database
    from haggler.trust.keys import P256, SigningKeys

    check_port(port)
    if workers > 1 and normalize_url(db).startswith("sqlite:"):
        raise _fail(f"--workers {workers} needs PostgreSQL: SQLite takes one writer at a time, so several "
                    "processes would only queue on its lock. Serve SQLite with one worker, or use "
                    "--db postgresql://... for several.")
    try:
        store_catalog = load_catalog(catalog, strict=strict_catalog)
        limits = StoreLimits(max_chat_starts_per_hour, max_messages_per_chat, idle_ttl, max_message_length,
                             limit_loopback=limit_loopback)
        skill = load_skill(merchant_skill) if merchant_skill is not None else None
        merchant = MerchantSettings(floor_margin=floor_margin, mode=merchant_mode, skill=skill,
                                    token_budget=llm_token_budget or None)
        agents = AgentsSettings(session_ttl_seconds=session_ttl, max_sessions=max_sessions,
                                requests_per_minute=requests_per_minute, audit_enabled=audit)
        proxies = parse_networks(trusted_proxy or [])
        matching = matching_settings(
            operator_token, claim_timeout, parked_timeout, negotiation_timeout, protocol_version=negotiation_protocol,
            v2_screen=v2_screen, v2_ask_user=v2_ask_user, v2_ask_user_window_seconds=v2_ask_user_window,
            v2_deadlock=v2_deadlock, v2_deadlock_threshold=v2_deadlock_threshold, v2_wall_clock_seconds=v2_wall_clock)
        market = market_settings(offer_turn_cap, clear_interval, deal_expiry)
        ucp = UcpSettings(simulation_secret=simulation_secret)
        acp = AcpSettings(api_key=acp_api_key, webhook_url=acp_webhook_url,
                          webhook_secret=os.environ.get("HAGGLER_ACP_WEBHOOK_SECRET") or None)
        mail = MailSettings(smtp_url=os.environ.get("HAGGLER_SMTP_URL") or None, sender=mail_from)
        client_limits = ClientLimits(max_wrong_tokens, max_registrations_per_hour, max_agent_messages_per_hour,
                                     max_contacts_per_hour)
        if allowed_host:
            AllowedHosts(allowed_host)  # a bad name stops start-up here, named, rather than in create_app
    except (CatalogError, ValueError) as exc:
        raise _fail(str(exc)) from None
    for warning in store_catalog.warnings:
        err.print(f"[yellow]warning:[/] {escape(f'{catalog}: {warning}')} (kept hidden: --no-strict-catalog)")
    if public_url is not None and not public_url.startswith(("http://", "https://")):
        raise _fail(f"--public-url must be an absolute http(s) URL, got {public_url!r}")
    if access_log not in ("json", "off"):
        raise _fail(f"--access-log must be json or off, got {access_log!r}")
    if not db_timeout > 0:
        raise _fail(f"--db-timeout must be a positive number of seconds, got {db_timeout}")
    if merchant.mode == "deterministic" and (llm_provider or llm_model):
        raise _fail("--llm-provider and --llm-model need --merchant llm-voice or --merchant llm")
    if merchant.mode != "deterministic" and not (llm_provider or llm_model):
        raise _fail(f"--merchant {merchant.mode} needs --llm-provider and --llm-model")
    model = llm_backend(llm_provider, llm_model, llm_base_url, llm_timeout, llm_prices)
    stripe = stripe_handler(stripe_return_url, stripe_account)
    config = StoreConfig(catalog=store_catalog, db_url=db, db_timeout_seconds=db_timeout, access_log=access_log == "json",
                         public_url=public_url, trusted_proxies=proxies,
                         allowed_hosts=tuple(allowed_host or ()), limits=limits, merchant=merchant,
                         merchant_model=model, agents=agents, exchange=ExchangeSettings(allow_deposits=sandbox_deposits),
                         matching=matching, market=market, ucp=ucp, acp=acp, mail=mail, client_limits=client_limits,
                         payment_handlers=(stripe,) if stripe else (), checkout_counter_offers=checkout_counter_offers,
                         data_dir=data_dir,
                         seed=seed, sweep_interval_seconds=sweep_interval(idle_ttl, matching, market))
    try:
        if workers == 1:
            application = create_app(config)
        else:
            # Checked once, before the fork, so that a store that cannot start says why here instead
            # of in workers restarted over and over: the database (migrated now), the signing keys.
            open_database(db).dispose()
            if agents.audit_enabled:
                SigningKeys(data_dir).public_key_b64  # loads (or creates) it; refuses a file others may read
            if ucp.enabled:
                SigningKeys(data_dir, P256).public_key_b64
    except (DatabaseError, PermissionError) as exc:
        raise _fail(str(exc)) from None
    base = escape(browsable_base(host, port, allowed_host or (), public_url))
    err.print(f"[bold]{escape(store_catalog.store.name)}[/] — {len(store_catalog.products)} products, "
              f"negotiate.v1 at {base}/negotiate.json" + (f", {workers} workers" if workers > 1 else ""))
    err.print(f"storefront at {base}/ (each product page haggles through /widget.js)")
    err.print(f"match negotiation at {base}/api" + (
        "" if matching.operator_token else " (no --operator-token: its operator routes answer 403)"))
    err.print(f"operator dashboard at {base}/admin" + (
        "" if matching.operator_token else " (no --operator-token: it answers 403)"))
    err.print(f"agent-native market at {base}/market (schemas at /market/schemas)")
    err.print(f"UCP checkout at {base}/.well-known/ucp" + (
        " (simulation secret set: simulated payments and /testing routes, take no real orders)"
        if simulation_secret else ""))
    err.print(f"ACP checkout at {base}/.well-known/acp.json" if acp.enabled
              else "ACP checkout not served (set HAGGLER_ACP_API_KEY to serve it)")
    err.print(f"order confirmations mailed from {mail.sender}" if mail.enabled
              else "no order confirmations mailed (set HAGGLER_SMTP_URL and --mail-from to send them)")
    if acp.webhook_url:
        err.print(f"ACP orders announced to {acp.webhook_url} (order_create, signed with HAGGLER_ACP_WEBHOOK_SECRET)")
    if stripe is not None:
        err.print(f"payments through Stripe (handler {stripe.id}, account {stripe.account_id}, {stripe.environment}; "
                  "3-D Secure returns UCP buyers to the store's own page, " + (
                      "ACP buyers to --stripe-return-url)" if stripe.return_url else
                      "and in ACP, without --stripe-return-url, needs an agent that runs it itself)"))
    elif not simulation_secret:
        err.print("no payment handler: set HAGGLER_STRIPE_API_KEY to take payments through Stripe (docs/payments.md)")
    if host in WILDCARD_HOSTS:
        err.print(escape(wildcard_advice(host, allowed_host or (), public_url)))
    # proxy_headers=False: uvicorn would otherwise rewrite the client address from
    # X-Forwarded-For for 127.0.0.1; haggler decides that itself (--trusted-proxy).
    # http: uvicorn's httptools protocol, each response's headers and body sent in one write.
    # access_log=False: the store writes its own (--access-log), with the request id and route.
    options = {"proxy_headers": False, "log_level": log_level, "timeout_graceful_shutdown": 5,
               "http": CoalescingHttpToolsProtocol, "access_log": False}
    if workers == 1:
        uvicorn.run(application, host=host, port=port, **options)
    else:
        serve_workers(lambda: create_app(config), host=host, port=port, workers=workers, uvicorn_options=options)


def stripe_handler(return_url: str | None, account: str | None) -> StripeHandler | None:
    """The Stripe payment handler when ``HAGGLER_STRIPE_API_KEY`` is set, None otherwise. The key is
    read from the environment only, never from a flag: a command line is readable by every user of
    the machine. ``HAGGLER_STRIPE_API_BASE`` points it at a stand-in for Stripe (tests only). A missing
    extra, a key that is no secret key or that Stripe refuses, or no answer from Stripe stops start-up
    with a message saying what to do, rather than the first buyer's payment."""
    from haggler.payments import PaymentSetupError, PaymentUnavailable
    from haggler.payments.stripe_handler import API_BASE_ENV, KEY_ENV, StripeHandler

    key = os.environ.get(KEY_ENV)
    if not key:
        if return_url or account:
            raise _fail(f"--stripe-return-url and --stripe-account configure the Stripe payment handler, which "
                        f"needs {KEY_ENV} in the environment")
        return None
    if return_url is not None and not (return_url.startswith(("http://", "https://")) and urlsplit(return_url).netloc):
        raise _fail(f"--stripe-return-url must be an absolute http(s) URL, got {return_url!r}")
    try:
        return StripeHandler(key, return_url=return_url, account_id=account, api_base=os.environ.get(API_BASE_ENV))
    except PaymentSetupError as exc:
        raise _fail(str(exc)) from None
    except PaymentUnavailable as exc:
        raise _fail(f"{exc}: set --stripe-account (HAGGLER_STRIPE_ACCOUNT) to start without asking") from None


def check_port(port: int) -> None:
    """Refuse a port no socket can have: uvicorn would otherwise listen on whatever the system
    makes of it (99999 wraps around) while every printed link names the port asked for."""
    if not 1 <= port <= 65535:
        raise _fail(f"--port must be between 1 and 65535, got {port}")


def wildcard_advice(host: str, allowed_host: Sequence[str], public_url: str | None) -> str:
    """The line ``serve`` adds when it listens on every interface: the store answers only the host
    names it allows (DNS rebinding, links a cache would hand to everyone), so a request from
    another machine by its address or name gets 400 unless that name was given."""
    listening = f"listening on every interface ({host or 'all addresses'})"
    if public_url or allowed_host:
        names = ", ".join(allowed_host) if allowed_host else urlsplit(public_url or "").netloc
        return (f"{listening}: other machines reach the store only as {names} (--allowed-host, "
                "--public-url); any other host name answers 400")
    return (f"{listening}: other machines reach the store only by a name given with --allowed-host (or "
            "--public-url), e.g. --allowed-host 192.168.1.20 --allowed-host shop.lan; until then they get 400")


def sweep_interval(idle_ttl: int, matching: MatchingSettings, market: MarketSettings = _MARKET_DEFAULTS) -> float:
    """How often deadlines are swept: a quarter of the shortest of them, between 1 s and a minute
    (reads apply a passed deadline too; the sweep catches the negotiations and deals nobody reads)."""
    shortest = min(idle_ttl, matching.claim_timeout_seconds, matching.parked_timeout_seconds,
                   matching.negotiation_timeout_seconds, matching.v2_ask_user_window_seconds,
                   matching.v2_wall_clock_seconds, market.deal_expiry_seconds)
    return min(60.0, max(1.0, shortest / 4))


T = TypeVar("T")


def _read_database(db: str, read: Callable[[Any], T]) -> T:
    """``read(conn)`` in a read transaction of the store's database at ``db`` (migrated first); a
    database that does not exist or cannot be opened is a CLI error, not a traceback, and is
    never created."""
    from haggler.storage.database import DatabaseError, open_database

    try:
        database = open_database(db, existing=True)
    except DatabaseError as exc:
        raise _fail(str(exc)) from None
    try:
        with database.read() as conn:
            return read(conn)
    finally:
        database.dispose()


@app.command()
def check(
    url: Annotated[str, typer.Argument(help="The store: a domain or base URL, e.g. shop.example.com.")],
    probe_rate_limit: Annotated[bool, typer.Option(help="Also check that chat-start limits cannot be dodged with "
                                                        "X-Forwarded-For. Uses up this machine's chat starts at the "
                                                        "store for about an hour.")] = False,
    product_id: Annotated[Optional[str], typer.Option(help="Product to chat about (default: the first listed).")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each response.")] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check any store against nash.v1 or negotiate.v1 (the report names the version found); exits
    non-zero when a MUST fails."""
    from haggler.shopper.conformance import run_checks
    from haggler.shopper.conformance_report import print_report

    report = run_checks(url, probe_rate_limit=probe_rate_limit, timeout=timeout, product_id=product_id)
    if as_json:
        json.dump(report.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_report(report, _wide_console())
    if report.must_failures:
        raise typer.Exit(code=1)


def parse_values(text: str | None) -> dict[str, float]:
    """``"shipping=30,battery=80"`` → ``{"shipping": 30.0, "battery": 80.0}``."""
    values: dict[str, float] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, amount = part.partition("=")
        try:
            if not sep or not key.strip():
                raise ValueError
            values[key.strip()] = float(amount)
        except ValueError:
            raise ValueError(f"--values wants keyword=amount pairs like 'shipping=30,battery=80', "
                             f"got {part.strip()!r}") from None
    return values


@app.command()
def shop(
    url: Annotated[str, typer.Argument(help="The store: a domain or base URL.")],
    product: Annotated[str, typer.Option(help="The product id to haggle for.")],
    budget: Annotated[float, typer.Option(help="The most you will pay (never revealed to the store).")],
    target: Annotated[Optional[float], typer.Option(help="A price you'd be happy with.")] = None,
    values: Annotated[Optional[str], typer.Option(help="What extras are worth to you: 'shipping=30,battery=80'.")] = None,
    interactive: Annotated[bool, typer.Option(help="Type each turn yourself; the agent's suggestion is pre-filled.")] = False,
    structured: Annotated[bool, typer.Option(help="Send turns as JSON (the store's structured extension).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the transcript and outcome as JSON.")] = False,
    seed: Annotated[Optional[int], typer.Option(help="Seed for the agent's wording.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each response.")] = 15.0,
    llm_provider: LLMProvider = None,
    llm_model: LLMModel = None,
    llm_base_url: LLMBaseURL = None,
    llm_token_budget: LLMTokenBudget = DEFAULT_TOKEN_BUDGET,
    llm_timeout: LLMTimeout = 20.0,
    llm_prices: LLMPrices = None,
) -> None:
    """Haggle for a product at any nash.v1 or negotiate.v1 store with haggler's shopper agent (with --llm-*:
    a model writes the turns, never above the budget and never stating it)."""
    import asyncio

    from haggler.shopper.errors import ShopperError
    from haggler.shopper.shop_view import ShopView

    try:
        extra_values = parse_values(values)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    backend = llm_backend(llm_provider, llm_model, llm_base_url, llm_timeout, llm_prices)
    # A transcript's lines: wrapped at the width on a terminal, never broken when piped.
    view = ShopView(_stdout_console(soft_wrap=True), quiet=as_json)

    async def haggle() -> object:
        from haggler.shopper.client import AsyncNegotiateClient
        from haggler.shopper.negotiation import goal_for, listing_for, run_negotiation

        async with AsyncNegotiateClient(timeout=timeout) as client:
            store = await client.discover(url)
            listing = listing_for(store, product)
            goal = goal_for(listing, budget, target, extra_values)
            view.start(store, listing)
            return await run_negotiation(client, store, product, goal, seed=seed, structured=structured,
                                         decide=view.decide if interactive else None, on_line=view.line,
                                         backend=backend, token_budget=llm_token_budget or None)

    try:
        result = asyncio.run(haggle())
    except ShopperError as exc:
        raise _fail(exc.message) from None
    except ValueError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        json.dump(result.to_json(), sys.stdout, indent=2)  # type: ignore[attr-defined]
        sys.stdout.write("\n")
    else:
        view.summary(result)  # type: ignore[arg-type]


@app.command()
def mcp(
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option(help="Address for --http.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port for --http.")] = 8001,
    allow_private: Annotated[bool, typer.Option(help="Let tools reach private and loopback addresses "
                                                     "(a store on this machine or your LAN).")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for a store's response.")] = 15.0,
    llm_provider: LLMProvider = None,
    llm_model: LLMModel = None,
    llm_base_url: LLMBaseURL = None,
    llm_token_budget: LLMTokenBudget = DEFAULT_TOKEN_BUDGET,
    llm_timeout: LLMTimeout = 20.0,
    llm_prices: LLMPrices = None,
) -> None:
    """Serve shopper tools to assistants over MCP (stdio by default); with --llm-*, a model
    writes the turns of the `negotiate` tool."""
    from haggler.shopper.mcp_server import build_server

    check_port(port)
    backend = llm_backend(llm_provider, llm_model, llm_base_url, llm_timeout, llm_prices)
    server = build_server(allow_private=allow_private, timeout=timeout, backend=backend,
                          token_budget=llm_token_budget or None)
    if http:
        server.run("streamable-http", host=host, port=port)
    else:
        server.run("stdio")


lab = typer.Typer(help="The negotiation lab: strategy tournaments and protocol comparisons.", no_args_is_help=True)
app.add_typer(lab, name="lab")


@app.command("validate-manifest")
def validate_manifest(
    source: Annotated[str, typer.Argument(help="A site (https://shop.example), a manifest URL, or a file.")],
) -> None:
    """Validate any site's agents.json: the JSON Schema (draft-07) plus the spec's five rules."""
    from haggler.protocols.agents_json.validate import ManifestLoadError, check_manifest, render_report

    try:
        report = check_manifest(source)
    except ManifestLoadError as exc:
        raise _fail(str(exc)) from None
    typer.echo(render_report(report))
    if not report.ok:
        raise typer.Exit(1)


keys = typer.Typer(help="The store's signing keys: Ed25519 (EdDSA) for audit trails, P-256 (ES256) for UCP's "
                        "order webhooks and AP2 merchant authorizations.", no_args_is_help=True)
app.add_typer(keys, name="keys")


@keys.command("rotate")
def keys_rotate(
    data_dir: Annotated[Path, typer.Option(help="The store's data directory.")] = DEFAULT_DATA_DIR,
    algorithm: Annotated[Optional[list[str]], typer.Option(
        help="Rotate only this key (repeatable): EdDSA (audit trails) or ES256 (UCP). Default: both.")] = None,
) -> None:
    """Replace the store's signing keys; old public keys stay known, so past audit artifacts verify.
    UCP's profile publishes the ES256 key the running store signs with, the new one once restarted
    (a checkout's merchant_authorization signed before then no longer verifies: the platform reads
    the checkout again)."""
    from haggler.trust.keys import ED25519, P256, SigningKeys

    kinds = {kind.algorithm: kind for kind in (ED25519, P256)}
    unknown = sorted(set(algorithm or ()) - set(kinds))
    if unknown:
        raise _fail(f"--algorithm must be EdDSA or ES256, not {', '.join(unknown)}")
    for name in algorithm or kinds:
        try:
            signing = SigningKeys(data_dir, kinds[name])
            old = signing.public_key_b64
            new = signing.rotate()
        except (OSError, ValueError) as exc:
            raise _fail(str(exc)) from None
        typer.echo(f"{name} retired {old}\n{name} new     {new}")
    typer.echo("Restart the store to sign with the new keys.")


audit_app = typer.Typer(help="Signed audit trails of agents.json sessions.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")


@audit_app.command("verify")
def audit_verify(
    source: Annotated[str, typer.Argument(help="An audit artifact: a file or an http(s) URL.")],
    trusted_key: Annotated[Optional[list[str]], typer.Option(help="Only accept artifacts signed by this base64 key (repeatable), e.g. the manifest's audit.public_key.")] = None,
) -> None:
    """Verify an audit artifact offline: the hash chain, the root hash and the Ed25519 signature."""
    from haggler.protocols.agents_json.audit import ArtifactLoadError, load_artifact, verify_artifact

    try:
        artifact = load_artifact(source)
    except ArtifactLoadError as exc:
        raise _fail(str(exc)) from None
    report = verify_artifact(artifact, trusted_keys=trusted_key or None)
    for line in report.checked:
        typer.echo(f"ok: {line}")
    for line in report.problems:
        typer.echo(f"FAIL: {line}")
    typer.echo("VERIFIED" if report.ok else "NOT VERIFIED")
    if not report.ok:
        raise typer.Exit(1)


@lab.command()
def tournament(
    strategies: Annotated[Optional[str], typer.Option(help="Comma-separated strategy names (default: all).")] = None,
    scenarios: Annotated[int, typer.Option(help="Scenarios in the set.")] = 20,
    seed: Annotated[int, typer.Option(help="Seed of the scenario set.")] = 0,
    out: Annotated[Path, typer.Option(help="Where results.csv, scenarios.json and the plots go.")] = Path("lab-out/tournament"),
    workers: Annotated[int, typer.Option(help="Processes to play on (the results are the same).")] = 1,
    write_csv: Annotated[bool, typer.Option("--csv/--no-csv", help="Write results.csv, a row per negotiation "
                                      "(--no-csv keeps only the tallies: for millions of negotiations).")] = True,
) -> None:
    """Every strategy against every other, in both roles, over a seeded scenario set."""
    from haggler.lab.tournament import main_tournament

    names = [n.strip() for n in strategies.split(",") if n.strip()] if strategies else None  # None: all
    if scenarios < 1:
        raise _fail("--scenarios must be at least 1")
    if workers < 1:
        raise _fail("--workers must be at least 1")
    try:
        main_tournament(names, scenarios, seed, out, _wide_console(), workers=workers, write_rows=write_csv)
    except (ValueError, RuntimeError) as exc:
        raise _fail(str(exc)) from None


@lab.command("compare-protocols")
def compare_protocols(
    runs: Annotated[int, typer.Option(help="Runs per protocol (the same scenarios for each).")] = 50,
    seed: Annotated[int, typer.Option(help="Seed of the scenario set.")] = 0,
    out: Annotated[Path, typer.Option(help="Where the CSV, charts and report go.")] = Path("lab-out/protocols"),
    report: Annotated[Optional[Path], typer.Option(
        help="Write the markdown report here instead of OUT/report.md (links relative to it).")] = None,
) -> None:
    """Free text, alternating offers, sealed bid, instant match and double auction on the same scenarios,
    and every red-team attack against each."""
    from haggler.lab.compare import main_compare

    if runs < 1:
        raise _fail("--runs must be at least 1")
    try:
        main_compare(runs, seed, out, _wide_console(), report)
    except (ValueError, RuntimeError) as exc:
        raise _fail(str(exc)) from None


match_app = typer.Typer(help="Bilateral match negotiation (spec 002): personal agents and insights.",
                        no_args_is_help=True)
app.add_typer(match_app, name="match")


@match_app.command("agent")
def match_agent(
    server: Annotated[str, typer.Option(help="The matching server's base URL, e.g. http://127.0.0.1:8000.")],
    agent_id: Annotated[str, typer.Option(help="The personal agent's id (agt_...).")],
    api_key: Annotated[str, typer.Option(envvar="HAGGLER_AGENT_API_KEY", show_envvar=True,
                                         help="The agent's API key (hma_...).")],
    interval: Annotated[float, typer.Option(help="Seconds between polls while no turn waits.")] = 30.0,
    once: Annotated[bool, typer.Option("--once", help="Handle the turns waiting now, then exit.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each response.")] = 30.0,
    llm_provider: LLMProvider = None,
    llm_model: LLMModel = None,
    llm_base_url: LLMBaseURL = None,
    llm_token_budget: LLMTokenBudget = DEFAULT_TOKEN_BUDGET,
    llm_timeout: LLMTimeout = 20.0,
    llm_prices: LLMPrices = None,
) -> None:
    """Run a user's personal agent: poll for its negotiation turns, decide and respond.

    Each parked turn is decided by the deterministic negotiator, or with --llm-provider and
    --llm-model by a model whose turns the server's rules are checked on first; the deterministic
    negotiator takes every turn the model does not give validly. An agent whose negotiationMode
    is disabled does not poll: its user's turns fall to the system negotiator after the parked
    timeout."""
    import math
    import signal
    from datetime import datetime

    from haggler.agents.match_negotiator import decide
    from haggler.agents.match_runtime import AgentError, Decider, MatchAgentRuntime

    if not server.startswith(("http://", "https://")):
        raise _fail(f"--server must be an http(s) URL, got {server!r}")
    if not (0 < interval < math.inf and 0 < timeout < math.inf):
        raise _fail("--interval and --timeout must be positive numbers of seconds")

    def log(line: str) -> None:
        typer.echo(f"{datetime.now():%H:%M:%S} {line}")

    if llm_token_budget < 0:
        raise _fail("--llm-token-budget must not be negative (0: no limit)")
    decider: Decider = decide
    backend = llm_backend(llm_provider, llm_model, llm_base_url, llm_timeout, llm_prices)
    if backend is not None:
        from haggler.agents.llm_match import LLMMatchDecider
        from haggler.agents.llm_proposals import Proposer

        decider = LLMMatchDecider(Proposer(backend, llm_token_budget or None, log=log))

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)  # a service manager's stop is a Ctrl-C
    # A shell starting a job in the background (`nohup ... &`) hands it SIGINT ignored, and Python
    # then installs no Ctrl-C handler: restore it, so that Ctrl-C stops the agent wherever it runs.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with MatchAgentRuntime(server, agent_id, api_key, decider=decider, interval=interval, timeout=timeout,
                               log=log) as runtime:
            status = runtime.run(once=once)
    except AgentError as exc:
        raise _fail(str(exc), code=1) from None
    except KeyboardInterrupt:
        log("stopped")
        return
    if status:
        raise typer.Exit(code=status)


@match_app.command("insights")
def match_insights(
    db: Annotated[str, typer.Option(help="Database URL.")] = DEFAULT_DB_URL,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Negotiation insights: outcomes by match type, the objections raised most, turns taken."""
    from haggler.protocols.matching.insights import insights

    data = _read_database(db, insights)
    if as_json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    console = _wide_console()
    count = data["negotiations"]
    console.print(f"{count} completed negotiation{'s' if count != 1 else ''}, "
                  f"{data['objectingTurns']} objecting turn{'s' if data['objectingTurns'] != 1 else ''}")
    if not count:
        return
    outcomes = Table(title="Outcomes by match type")
    for column in ("match type", "negotiations", "accepted", "rejected", "stalled"):
        outcomes.add_column(column, justify="left" if column == "match type" else "right")
    for kind, rates in data["byMatchType"].items():
        outcomes.add_row(kind, str(rates["negotiations"]),
                         *(f"{rates[k]} ({rates[k + 'Rate']:.0%})" for k in ("accepted", "rejected", "stalled")))
    console.print(outcomes)
    if data["objectionThemes"]:
        themes = Table(title="Objection themes")
        themes.add_column("theme")
        themes.add_column("turns", justify="right")
        for theme in data["objectionThemes"]:
            themes.add_row(theme["theme"], str(theme["turns"]))
        console.print(themes)
    turns = Table(title="Turns per negotiation")
    for column in ("scenario", "turns", "negotiations"):
        turns.add_column(column, justify="left" if column == "scenario" else "right")
    for scenario, counts in data["turnCounts"].items():
        for n, how_many in counts.items():
            turns.add_row(scenario, n, str(how_many))
    console.print(turns)


market_app = typer.Typer(help="The agent-native market (spec 003).", no_args_is_help=True)
app.add_typer(market_app, name="market")


@market_app.command("verify")
def market_verify(
    path: Annotated[Path, typer.Argument(help="The deal: the JSON GET /market/deals/{dealId} serves, "
                                              "or a bare deal_confirmed message (then give both keys).")],
    buyer_key: Annotated[Optional[str], typer.Option(
        help="The buyer agent's public key, 0x + 64 hex digits (overrides the document's publicKeys.buyer).")] = None,
    seller_key: Annotated[Optional[str], typer.Option(
        help="The seller agent's public key, 0x + 64 hex digits (overrides the document's publicKeys.seller).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON for scripts.")] = False,
) -> None:
    """Verify a deal offline (spec 003: 8. Deal Confirmation): both signatures and any owner approvals.

    The check shares no code with the market's signing, so a bug there cannot vouch for itself.
    Exit 0 when every check passes, 1 when one fails, 2 when the file cannot be checked."""
    from rich.text import Text

    from haggler.protocols.market.offline_check import DealDocumentError, check_deal, read_document

    try:
        result = check_deal(read_document(path), buyer_key=buyer_key, seller_key=seller_key)
    except DealDocumentError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        json.dump(result.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        console = _wide_console()
        if result.deal_id or result.status:
            console.print(Text(f"deal {result.deal_id or '?'} (status: {result.status or '?'})"))
        table = Table()
        for column in ("check", "result", "reason"):
            table.add_column(column)
        for check in result.checks:
            table.add_row(check.name, Text("valid", "green") if check.valid else Text("INVALID", "bold red"),
                          Text(check.reason))
        console.print(table)
        if result.valid:
            console.print(Text("valid: both parties signed these exact terms", "bold green"))
        else:
            failed = ", ".join(check.name for check in result.failures)
            console.print(Text(f"INVALID: {failed} failed (the reasons are in the table)", "bold red"))
    if not result.valid:
        raise typer.Exit(1)


@market_app.command("matrix")
def market_matrix(
    homeserver: Annotated[str, typer.Option(help="The homeserver's client API base URL, e.g. https://matrix.example.org.")],
    user: Annotated[str, typer.Option(help="The bot's Matrix user id, e.g. @market:example.org. Its password "
                                          "(HAGGLER_MATRIX_PASSWORD) or access token (HAGGLER_MATRIX_ACCESS_TOKEN) "
                                          "is read from the environment, never from the command line.")],
    room: Annotated[str, typer.Option(help="The market room: an alias (#market:example.org) or a room id.")],
    db: Annotated[str, typer.Option(help="The market's database, the one `haggler serve --db` uses, so that both "
                                        "doors open onto one market.")] = DEFAULT_DB_URL,
    create_room: Annotated[bool, typer.Option(help="Create the room under that alias if it does not exist (the bot "
                                                  "then holds its power, and can redact a floor posted there).")]
        = False,
    device_id: Annotated[str, typer.Option(help="The bot's device id: keep it across restarts, so that a message "
                                               "re-sent after a crash is deduplicated by the homeserver.")]
        = "HAGGLER_MARKET",
    offer_turn_cap: Annotated[int, typer.Option(
        help="Offers after which a natural-language negotiation ends without a deal (0: no cap); use serve's value.")]
        = _MARKET_DEFAULTS.offer_turn_cap or 0,
    deal_expiry: Annotated[int, typer.Option(
        help="Seconds a deal may wait for its signatures; use serve's value.")] = _MARKET_DEFAULTS.deal_expiry_seconds,
) -> None:
    """Run the market (spec 003) as a participant of a Matrix homeserver: listings and wanted ads in
    the room, negotiation in direct messages, the same checks as the HTTP API (docs/market-matrix.md).
    Stop it with Ctrl-C; it resumes where it stopped."""
    import asyncio
    import signal

    try:
        from haggler.matrix.bot import MarketBot, market_on
        from haggler.matrix.connection import Connection, MatrixLogin
    except ImportError as exc:
        raise _fail(f"the Matrix door needs the matrix extra: pip install 'haggler[matrix]' ({exc})") from None
    from haggler.storage.database import DatabaseError, open_database

    try:
        login = MatrixLogin.from_env(homeserver, user, device_id=device_id)
        settings = market_settings(offer_turn_cap, 0, deal_expiry)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    try:
        database = open_database(db)
    except DatabaseError as exc:
        raise _fail(str(exc)) from None

    async def serve_room() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await MarketBot(Connection(login), market_on(database, settings), room, create_room=create_room).run(stop)

    try:
        asyncio.run(serve_room())
    finally:
        database.dispose()


@market_app.command("scenario")
def market_scenario(
    path: Annotated[Path, typer.Argument(help="A clawlist-shaped scenario JSON file (item, seller.anchorPrice/"
                                              "floorPrice, buyer.startOffer/ceilingPrice, durationSec, "
                                              "seed.bodyTemplate).")],
    out: Annotated[Path, typer.Option(help="Where to write market.jsonl, dm.jsonl, meta.json and summary.json "
                                           "(with --sweep, one folder per run and aggregate.json).")] = Path("runs"),
    homeserver: Annotated[Optional[str], typer.Option(
        help="The Synapse to run on (its registration shared secret in HAGGLER_MATRIX_REGISTRATION_SECRET); "
             "default: a throwaway local one, started and stopped here.")] = None,
    sweep_runs: Annotated[int, typer.Option("--sweep", min=0, max=1000,
                                            help="Run the scenario N times and write aggregate.json (0: once).")] = 0,
) -> None:
    """Run a clawlist scenario on Matrix between a haggler seller and buyer, and score it as clawlist
    does (summary.json: result, dealReached, finalPrice, violations, metrics, quality), truthfully: a
    deal counts only when both agents signed it (docs/market-matrix.md)."""
    import os

    try:
        from haggler.matrix.homeserver import HomeserverError, LocalSynapse
        from haggler.matrix.local_market import Homeserver
        from haggler.matrix.scenario import ScenarioError, read_scenario
        from haggler.matrix.scenario_run import run_once, sweep
    except ImportError as exc:
        raise _fail(f"scenarios need the matrix extra: pip install 'haggler[matrix]' ({exc})") from None
    from haggler.server.config import utc_now

    try:
        scenario = read_scenario(path)
    except (OSError, ScenarioError) as exc:
        raise _fail(str(exc)) from None
    console = _wide_console()
    for ignored in scenario.ignored:
        console.print(f"[yellow]ignored field {ignored} (not a field haggler reads)[/yellow]")
    with contextlib.ExitStack() as stack:
        if homeserver is not None:
            secret = os.environ.get("HAGGLER_MATRIX_REGISTRATION_SECRET")
            if not secret:
                raise _fail("--homeserver needs its registration shared secret in HAGGLER_MATRIX_REGISTRATION_SECRET")
            server = Homeserver(homeserver.rstrip("/"), secret)
        else:
            try:
                local = stack.enter_context(LocalSynapse())
            except HomeserverError as exc:
                raise _fail(f"could not start a local Synapse ({exc}); pip install 'haggler[matrix-homeserver]' or "
                            "give --homeserver") from None
            server = Homeserver(local.url, local.registration_shared_secret)
        if sweep_runs:
            result = sweep(scenario, server, out, sweep_runs, started=utc_now())
            console.print(f"{result['passCount']}/{result['totalRuns']} pass, {result['noDealCount']} no deal, "
                          f"{result['failCount']} fail; average price {result['avgFinalPrice']}; "
                          f"{out / 'aggregate.json'}")
            return
        run_id = f"run_{utc_now().strftime('%Y%m%d_%H%M%S')}"
        summary = run_once(scenario, server, out, run_id)
    console.print(f"{summary['result']}: deal {'reached' if summary['dealReached'] else 'not reached'}"
                  f"{' at ' + str(summary['finalPrice']) if summary['finalPrice'] is not None else ''}; "
                  f"{summary['metrics']['offerCount']} offers; violations: {summary['violations'] or 'none'}; "
                  f"{out / 'summary.json'}")


@market_app.command("demo")
def market_demo(
    sellers: Annotated[int, typer.Option(min=1, max=500, help="Seller agents, each listing one item.")] = 8,
    buyers: Annotated[int, typer.Option(min=1, max=500, help="Buyer agents, each after one item.")] = 8,
    seed: Annotated[int, typer.Option(help="Seed of the items, prices and mandates: a seed replays a market.")] = 0,
    server: Annotated[Optional[str], typer.Option(
        help="Trade on this running market (base URL); default: a fresh one on a free loopback port.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON for scripts.")] = False,
    deals_dir: Annotated[Optional[Path], typer.Option(
        "--deals", help="Write each deal's signed document (as GET /market/deals/{dealId} serves it to its "
        "parties) to DIR/<dealId>.json, for `haggler market verify`.")] = None,
    llm_provider: LLMProvider = None,
    llm_model: LLMModel = None,
    llm_base_url: LLMBaseURL = None,
    llm_token_budget: LLMTokenBudget = DEFAULT_TOKEN_BUDGET,
    llm_timeout: LLMTimeout = 20.0,
    llm_prices: LLMPrices = None,
    llm_traders: Annotated[str, typer.Option(
        "--llm-traders", help="With a model: which traders run on it: buyers, sellers or all.")] = "buyers",
    matrix: Annotated[bool, typer.Option(
        "--matrix", help="Trade over Matrix instead of HTTP: a market bot and every agent a Matrix user, "
        "listings in a market room, negotiations in direct messages (docs/market-matrix.md).")] = False,
    homeserver: Annotated[Optional[str], typer.Option(
        help="With --matrix: the Synapse to use (its registration shared secret in "
             "HAGGLER_MATRIX_REGISTRATION_SECRET); default: a throwaway local one "
             "(pip install 'haggler[matrix-homeserver]').")] = None,
) -> None:
    """Run a seeded market of built-in agents over HTTP, or over Matrix (--matrix), and print its
    deals, protocol mix and surplus (spec 003). No API key needed: the agents are the deterministic
    built-in ones. With --llm-provider and --llm-model, a model makes the --llm-traders' choices;
    each is checked against the owner's mandate, and the built-in agent acts whenever it fails or
    the model fails."""
    import functools
    import logging
    import tempfile

    import httpx

    from haggler.agents.market_runtime import MarketDemo

    for noisy in ("httpx", "mcp"):  # one line per request would bury the tables
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from haggler.protocols.market.client import MarketError

    if llm_traders not in ("buyers", "sellers", "all"):
        raise _fail(f"--llm-traders must be buyers, sellers or all, not {llm_traders!r}")
    if llm_token_budget < 0:
        raise _fail("--llm-token-budget must not be negative (0: no limit)")
    backend = llm_backend(llm_provider, llm_model, llm_base_url, llm_timeout, llm_prices)
    agents: dict[str, Any] = {}
    proposer = None
    if backend is not None:
        from haggler.agents.llm_market import LLMMarketBuyer, LLMMarketSeller
        from haggler.agents.llm_proposals import Proposer

        proposer = Proposer(backend, llm_token_budget or None)
        if llm_traders in ("buyers", "all"):
            agents["buyer_agent"] = functools.partial(LLMMarketBuyer, proposer=proposer)
        if llm_traders in ("sellers", "all"):
            agents["seller_agent"] = functools.partial(LLMMarketSeller, proposer=proposer)

    if matrix and server is not None:
        raise _fail("--server is the HTTP door; with --matrix, give --homeserver (or nothing, for a local one)")
    if homeserver is not None and not matrix:
        raise _fail("--homeserver goes with --matrix")
    with contextlib.ExitStack() as stack:
        base = server
        if matrix:
            result = _matrix_demo(stack, homeserver, sellers=sellers, buyers=buyers, seed=seed, **agents)
            base = "matrix"
        elif base is None:
            from haggler.server.app import create_app
            from haggler.server.config import StoreConfig
            from haggler.server.threaded import ThreadedServer

            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="haggler-market-")))
            app_ = create_app(StoreConfig(catalog=load_catalog(None), db_url=f"sqlite:///{folder}/market.db",
                                          data_dir=folder / "data", sweep_interval_seconds=None))
            base = stack.enter_context(ThreadedServer(app_)).base
        if not matrix:
            http = stack.enter_context(httpx.Client(base_url=base, timeout=30))
            try:
                result = MarketDemo(http, sellers=sellers, buyers=buyers, seed=seed, **agents).run()
            except (httpx.HTTPError, MarketError) as exc:
                raise _fail(f"the market at {base} failed the demo: {exc}") from None
    if deals_dir is not None:
        deals_dir.mkdir(parents=True, exist_ok=True)
        for deal_id, document in result.documents.items():
            (deals_dir / f"{deal_id}.json").write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n",
                                                       encoding="utf-8")
    model: dict[str, Any] | None = None if proposer is None else {
        "traders": llm_traders, "calls": proposer.usage.calls, "inputTokens": proposer.usage.input_tokens,
        "outputTokens": proposer.usage.output_tokens, "costNanoUSD": proposer.usage.cost_nanousd,
        "fallbacks": dict(proposer.fallbacks)}
    if as_json:
        json.dump({**result.to_json(), **({"model": model} if model else {})}, sys.stdout, indent=2,
                  ensure_ascii=False)
        sys.stdout.write("\n")
        return
    console = _wide_console()
    deals = Table(title=f"Deals ({len(result.deals)}; {sellers} sellers, {buyers} buyers, seed {seed})")
    for column in ("item", "protocol", "price", "buyer", "seller", "buyer surplus", "seller surplus", "status"):
        deals.add_column(column, justify="right" if "price" in column or "surplus" in column else "left")
    for deal in result.deals:
        deals.add_row(deal.item, deal.protocol, format_money(deal.price_cents, "EUR"), deal.buyer, deal.seller,
                      format_money(deal.buyer_surplus, "EUR"), format_money(deal.seller_surplus, "EUR"), deal.status)
    console.print(deals)
    mix = Table(title="Protocols")
    for column in ("protocol", "proposed by buyers", "deals"):
        mix.add_column(column, justify="left" if column == "protocol" else "right")
    for protocol in sorted(set(result.proposed) | set(result.protocol_mix)):
        mix.add_row(protocol, str(result.proposed.get(protocol, 0)), str(result.protocol_mix.get(protocol, 0)))
    console.print(mix)
    totals = result.to_json()["surplus"]
    console.print(f"surplus: buyers {format_money(totals['buyers'], 'EUR')}, sellers "
                  f"{format_money(totals['sellers'], 'EUR')}; no deal: "
                  + (", ".join(f"{reason} {n}" for reason, n in sorted(result.failures.items())) or "none"))
    if model:
        console.print(f"model ({llm_traders}): {model['calls']} calls, {model['inputTokens']} + "
                      f"{model['outputTokens']} tokens; built-in agent took over: "
                      + (", ".join(f"{why} {n}" for why, n in sorted(model["fallbacks"].items())) or "never"))


def _matrix_demo(stack: contextlib.ExitStack, homeserver: str | None, **demo: Any) -> Any:
    """``market demo --matrix``: the demo's traders as Matrix users on a market bot."""
    import os

    try:
        from haggler.agents.market_runtime import MarketDemo
        from haggler.matrix.homeserver import HomeserverError
        from haggler.matrix.local_market import Homeserver, MatrixMarket
    except ImportError as exc:
        raise _fail(f"--matrix needs the matrix extra: pip install 'haggler[matrix]' ({exc})") from None
    from haggler.protocols.market.client import MarketError

    given = None
    if homeserver is not None:
        secret = os.environ.get("HAGGLER_MATRIX_REGISTRATION_SECRET")
        if not secret:
            raise _fail("--homeserver needs its registration shared secret in HAGGLER_MATRIX_REGISTRATION_SECRET "
                        "(to register the bot and the agents)")
        given = Homeserver(homeserver.rstrip("/"), secret)
    try:
        market = stack.enter_context(MatrixMarket(homeserver=given))
        return MarketDemo(None, client=market.client, **demo).run()
    except (HomeserverError, MarketError, RuntimeError, TimeoutError) as exc:
        raise _fail(f"the market on Matrix failed the demo: {exc}") from None


@market_app.command("agent")
def market_agent(
    role: Annotated[str, typer.Option(help="seller (lists the item) or buyer (posts a wanted ad and shops).")],
    item: Annotated[str, typer.Option(help="The item as category.subcategory.name (lowercase slugs), e.g. "
                                           "electronics.gaming_console.nintendo_switch.")],
    price: Annotated[str, typer.Option(help="A seller's ask; a buyer's start, the budget its wanted ad states. "
                                            "In major units, e.g. 180.")],
    limit: Annotated[str, typer.Option(help="The owner's limit, signed into the agent's mandate and never "
                                            "shown: a seller's floor, a buyer's ceiling (maxSpend).")],
    duration: Annotated[float, typer.Option(help="Seconds to trade before giving up.")] = 300.0,
    condition: Annotated[str, typer.Option(help="A seller's item condition: new, like_new, good, fair or poor.")]
        = "good",
    currency: Annotated[str, typer.Option(help="The currency of the prices and the mandate.")] = "EUR",
    agent_id: Annotated[Optional[str], typer.Option(help="The agent's market id (default: role and a random "
                                                          "suffix).")] = None,
    server: Annotated[Optional[str], typer.Option(help="Trade over HTTP: the market's base URL "
                                                        "(haggler serve).")] = None,
    matrix: Annotated[bool, typer.Option("--matrix", help="Trade over Matrix, through the market bot "
                                                          "(docs/market-matrix.md).")] = False,
    homeserver: Annotated[Optional[str], typer.Option(help="With --matrix: the homeserver's client API base URL.")]
        = None,
    user: Annotated[Optional[str], typer.Option(help="With --matrix: the agent's Matrix user, e.g. @seller:example.org. "
                                                     "Its password (HAGGLER_MATRIX_PASSWORD) or access token "
                                                     "(HAGGLER_MATRIX_ACCESS_TOKEN) is read from the environment.")]
        = None,
    room: Annotated[Optional[str], typer.Option(help="With --matrix: the market room, e.g. '#market:example.org'.")]
        = None,
    bot: Annotated[Optional[str], typer.Option(help="With --matrix: the market bot's user, e.g. @market:example.org.")]
        = None,
    device_id: Annotated[str, typer.Option(help="With --matrix: the agent's device id.")] = "HAGGLER_AGENT",
    poll: Annotated[float, typer.Option(help="Seconds between two reads of the agent's inbox.")] = 0.5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON for scripts.")] = False,
    llm_provider: LLMProvider = None,
    llm_model: LLMModel = None,
    llm_base_url: LLMBaseURL = None,
    llm_token_budget: LLMTokenBudget = DEFAULT_TOKEN_BUDGET,
    llm_timeout: LLMTimeout = 20.0,
    llm_prices: LLMPrices = None,
) -> None:
    """Run one market agent on its own (spec 003), over HTTP (--server) or Matrix (--matrix): it files
    its owner's mandate, lists the item or posts a wanted ad, then answers what reaches its inbox
    until its deal is confirmed, its negotiation fails, or --duration runs out. A buyer on Matrix
    also haggles in words with plain-text sellers (SELLING: lines), every price checked against its
    mandate before it is sent. With --llm-*, a model makes the agent's choices, each checked the same
    way. Exit 0 with a deal, 1 without one."""
    import logging

    import httpx

    from haggler.agents.market import Interest
    from haggler.agents.market_live import LiveBuyer, LiveSeller
    from haggler.errors import InvalidInput
    from haggler.protocols.market.client import MarketError

    if role not in ("seller", "buyer"):
        raise _fail(f"--role must be seller or buyer, not {role!r}")
    if not (duration > 0 and poll > 0):
        raise _fail("--duration and --poll must be positive numbers of seconds")
    price_cents, limit_cents = _major_units("--price", price), _major_units("--limit", limit)
    if role == "seller" and price_cents < limit_cents:
        raise _fail("a seller's --price (its ask) cannot be below its --limit (the floor)")
    if role == "buyer" and price_cents > limit_cents:
        raise _fail("a buyer's --price (its start) cannot be above its --limit (the ceiling)")
    slugs = item.split(".")
    try:
        wants = Interest(*slugs) if len(slugs) == 3 else None
    except InvalidInput:
        wants = None
    if wants is None:
        raise _fail(f"--item must be category.subcategory.name in lowercase slugs, not {item!r}")
    if llm_token_budget < 0:
        raise _fail("--llm-token-budget must not be negative (0: no limit)")
    backend = llm_backend(llm_provider, llm_model, llm_base_url, llm_timeout, llm_prices)
    logging.getLogger("httpx").setLevel(logging.WARNING)

    with contextlib.ExitStack() as stack:
        if not as_json:  # what the agent does, as it does it, on stderr
            said = logging.StreamHandler()
            said.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
            agent_log = logging.getLogger("haggler.market.agent")
            stack.callback(agent_log.setLevel, agent_log.level)
            stack.callback(agent_log.removeHandler, said)
            agent_log.addHandler(said)
            agent_log.setLevel(logging.INFO)
        client, chat = _market_door(stack, agent_id or f"{role}_{os.urandom(4).hex()}", server=server, matrix=matrix,
                                    homeserver=homeserver, user=user, room=room, bot=bot, device_id=device_id)
        options: dict[str, Any] = {"poll": poll, **_llm_market_agent(backend, llm_token_budget, role, wants.name)}
        if role == "seller":
            agent: Any = LiveSeller(client, {"category": wants.category, "subcategory": wants.subcategory,
                                             "name": wants.name, "condition": condition},
                                    ask_cents=price_cents, floor_cents=limit_cents, currency=currency, **options)
        else:
            agent = LiveBuyer(client, wants, budget_cents=price_cents, limit_cents=limit_cents, currency=currency,
                              chat=chat, **options)
        try:
            result = agent.run(duration)
        except (MarketError, InvalidInput, httpx.HTTPError) as exc:
            raise _fail(f"the agent could not start on the market: {exc}", code=1) from None
    if as_json:
        json.dump(result.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        typer.echo(_live_outcome(result, wants.name, currency))
    if result.price_cents is None:
        raise typer.Exit(1)


def _major_units(option: str, text: str) -> int:
    """A price option in cents: positive, and no fraction of a cent (a limit is not rounded)."""
    from haggler.money import is_exact_cents, positive_cents

    try:
        cents = positive_cents(text, allow_strings=True)
    except ValueError as exc:
        raise _fail(f"{option} {exc}") from None
    if not is_exact_cents(text, cents):
        raise _fail(f"{option} must be a whole number of cents, not {text!r}")
    return cents


def _market_door(stack: contextlib.ExitStack, agent_id: str, *, server: str | None, matrix: bool,
                 homeserver: str | None, user: str | None, room: str | None, bot: str | None,
                 device_id: str) -> tuple[Any, Any]:
    """``market agent``'s client (HTTP or Matrix), and its plain-text chat (Matrix only)."""
    if matrix == (server is not None):
        raise _fail("give one door: --server URL (HTTP), or --matrix with --homeserver, --user, --room and --bot")
    if not matrix:
        import httpx

        from haggler.protocols.market.client import MarketClient

        if not server.startswith(("http://", "https://")):  # type: ignore[union-attr]
            raise _fail(f"--server must be an http(s) URL, got {server!r}")
        return MarketClient(stack.enter_context(httpx.Client(base_url=server, timeout=30)), agent_id), None
    missing = [name for name, value in (("--homeserver", homeserver), ("--user", user), ("--room", room),
                                        ("--bot", bot)) if not value]
    if missing:
        raise _fail(f"--matrix needs {', '.join(missing)}")
    try:
        from haggler.matrix.agent_client import MatrixMarketClient, MatrixSession
        from haggler.matrix.connection import MatrixError, MatrixLogin
    except ImportError as exc:
        raise _fail(f"--matrix needs the matrix extra: pip install 'haggler[matrix]' ({exc})") from None
    try:
        login = MatrixLogin.from_env(homeserver, user, device_id=device_id)  # type: ignore[arg-type]
        session = MatrixSession(login, bot, room).start()  # type: ignore[arg-type]
    except (ValueError, MatrixError, TimeoutError) as exc:
        raise _fail(f"could not join the market on Matrix: {exc}") from None
    stack.callback(session.close)
    return MatrixMarketClient(session, agent_id), session


def _llm_market_agent(backend: LLMBackend | None, token_budget: int, role: str, product: str) -> dict[str, Any]:
    """With a model: the decider a live agent of ``role`` runs on (as ``market demo`` builds it),
    and a buyer's shopper in a plain-text haggle; nothing without one (the built-in agents)."""
    if backend is None:
        return {}
    import functools

    from haggler.agents.llm_market import LLMMarketBuyer, LLMMarketSeller
    from haggler.agents.llm_proposals import Proposer
    from haggler.agents.llm_shopper import LLMShopper
    from haggler.agents.shopper import ShopperAgent

    proposer = Proposer(backend, token_budget or None)
    if role == "seller":
        return {"seller_agent": functools.partial(LLMMarketSeller, proposer=proposer)}
    return {"buyer_agent": functools.partial(LLMMarketBuyer, proposer=proposer),
            "shopper": lambda goal, transcript: LLMShopper(ShopperAgent(goal), backend, product=product,
                                                           transcript=transcript, token_budget=token_budget or None)}


def _live_outcome(result: Any, item: str, currency: str) -> str:
    """``market agent``'s outcome in a few lines."""
    lines = [f"refused to send {format_money(refusal.price_cents, currency)}: {refusal.constraint} "
             f"({refusal.reason})" for refusal in result.refused]
    if result.deal is not None:
        deal = result.deal.get("deal", {})
        verb = "sold" if result.role == "seller" else "bought"
        lines.append(f"deal {result.deal['dealId']} confirmed: {result.agent_id} {verb} {item} at "
                     f"{format_money(result.price_cents, currency)} by {deal.get('protocol')}, signed by both")
    elif result.text_deal is not None:
        lines.append(f"agreed in words with {result.text_deal.seller} at {format_money(result.price_cents, currency)} "
                     f"in {result.text_deal.room_id}: unsigned, no market deal")
    else:
        lines.append(f"no deal ({result.outcome}): {result.reason}")
    return "\n".join(lines)


def _stdout_console(**piped: Any) -> Console:
    """Standard output's console: Rich's own on a terminal; piped, made with ``piped``, so that
    what scripts read stays one line (Rich would break it at 80 columns)."""
    console = Console()
    return console if console.is_terminal else Console(**piped)


def _wide_console() -> Console:
    """A console for tables: when piped, wide enough that each row stays on one line."""
    return _stdout_console(width=200)


ucp_app = typer.Typer(help="UCP, the Universal Commerce Protocol: the merchant's checkout data.", no_args_is_help=True)
app.add_typer(ucp_app, name="ucp")


@ucp_app.command("seed")
def ucp_seed(
    directory: Annotated[Path, typer.Argument(help="A data set in the UCP conformance suite's CSV layout "
                                                   "(products.csv, inventory.csv, discounts.csv, ...).")],
    db: Annotated[str, typer.Option(help="Database URL: sqlite:///file.db or postgresql://user@host/db.")]
    = DEFAULT_DB_URL,
) -> None:
    """Load a checkout data set into the store's database (created and migrated if need be),
    replacing the one loaded before: products, inventory, discounts, promotions, shipping rates,
    customers, addresses and payment instruments, all or nothing."""
    from haggler.commerce.merchant_data import load_seed, read_seed
    from haggler.errors import InvalidInput
    from haggler.storage.database import DatabaseError, open_database

    if not directory.is_dir():
        raise _fail(f"{directory} is not a directory")
    try:
        data = read_seed(directory)
        database = open_database(db)
    except (InvalidInput, DatabaseError) as exc:
        raise _fail(str(exc)) from None
    try:
        with database.write() as conn:
            counts = load_seed(conn, data)
    except InvalidInput as exc:
        raise _fail(str(exc)) from None
    except KeyError as exc:
        raise _fail(f"{directory}: a CSV file lacks the column {exc}") from None
    finally:
        database.dispose()
    err.print(f"loaded {', '.join(f'{n} {name[:-4].replace(chr(95), chr(32))}' for name, n in counts.items())} "
              f"into {escape(database.safe_url)}")


checkout_app = typer.Typer(help="Agentic checkout (UCP, ACP): payments the store settles by hand.",
                           no_args_is_help=True)
app.add_typer(checkout_app, name="checkout")
_CHECKOUT_PROTOCOLS = ("ucp", "acp")


def _checkout_sessions(db: str) -> tuple[Any, dict[str, Any]]:
    """The database, and each checkout protocol's sessions on it (no payment handler: nothing here
    charges)."""
    from haggler.commerce.sessions import CheckoutSessions
    from haggler.server.config import utc_now
    from haggler.storage.database import DatabaseError, open_database

    try:
        database = open_database(db)
    except DatabaseError as exc:
        raise _fail(str(exc)) from None
    return database, {p: CheckoutSessions(database, utc_now, p, {}) for p in _CHECKOUT_PROTOCOLS}


@checkout_app.command("holds")
def checkout_holds(
    db: Annotated[str, typer.Option(help="Database URL: sqlite:///file.db or postgresql://user@host/db.")]
    = DEFAULT_DB_URL,
) -> None:
    """List the checkouts holding a payment without a final answer (no answer from the processor, a
    buyer sent to 3-D Secure, a completion cut off), oldest first, with what each holds."""
    database, by_protocol = _checkout_sessions(db)
    try:
        table = Table("session", "protocol", "payment", "amount", "first sent", "processor reference")
        for protocol, sessions in by_protocol.items():
            for session in sessions.unsettled():
                paid = session.hold.payment
                table.add_row(session.id, protocol, paid.state.replace("_", " "),
                              f"{decimal_string(paid.amount_cents)} {session.currency}", utc_z(paid.first_at),
                              paid.reference or "")
    finally:
        database.dispose()
    if table.row_count:
        _wide_console().print(table)
    else:
        err.print("no checkout holds an unsettled payment")


@checkout_app.command("settle")
def checkout_settle(
    session_id: Annotated[str, typer.Argument(help="The checkout session (from `haggler checkout holds`).")],
    paid: Annotated[Optional[str], typer.Option(help="The payment went through: the processor's reference for "
                                                     "it. The order is placed at the held price.")] = None,
    unpaid: Annotated[bool, typer.Option("--unpaid", help="No money moved: the stock and the deal go back and the "
                                                          "checkout is canceled.")] = False,
    db: Annotated[str, typer.Option(help="Database URL: sqlite:///file.db or postgresql://user@host/db.")]
    = DEFAULT_DB_URL,
) -> None:
    """Settle a held payment by hand, after checking the processor's own records: `--paid REFERENCE`
    or `--unpaid`, exactly one."""
    from haggler.errors import HagglerError

    if (paid is None) == (not unpaid):
        raise _fail("say what the processor's records show: --paid REFERENCE or --unpaid")
    database, by_protocol = _checkout_sessions(db)
    try:
        owner = next((s for s in by_protocol.values() if any(x.id == session_id for x in s.unsettled())), None)
        if owner is None:
            raise _fail(f"no checkout {session_id} holds an unsettled payment (see `haggler checkout holds`)")
        _, order = owner.settle(session_id, paid_reference=paid)
    except HagglerError as exc:
        raise _fail(exc.message) from None
    finally:
        database.dispose()
    err.print(f"{session_id}: order {order.id} placed" if order else f"{session_id}: canceled, stock and deal given back")


# The dashboard's commands (deals, orders, chats, chat, stats, exchange, match opportunities, market
# books and deals) live beside the dashboard, which reads the same reports.
from haggler.web.admin.commands import register as _register_dashboard_commands  # noqa: E402

_register_dashboard_commands(app, match_app=match_app, market_app=market_app)


def main() -> None:
    """The ``haggler`` command. Typer draws a usage error (an unknown option, a bad value) in a
    box as wide as the console, which is 80 columns when piped, so a script's ``grep`` would see
    it broken across lines; off a terminal it is click's plain one-line ``Error: ...`` instead."""
    if not sys.stderr.isatty():
        app.rich_markup_mode = None
    app(prog_name="haggler")


if __name__ == "__main__":  # pragma: no cover
    main()
