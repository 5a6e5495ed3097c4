"""The `quantroute` command. Each command group lives in its own module and is imported only when used,
so `quantroute policy explain` does not pay for importing the router or Streamlit."""

from __future__ import annotations

import importlib

import click

# name -> "module:attribute" of a click command or group.
COMMANDS: dict[str, str] = {
    "policy": "quantroute.cli.policy:policy",
    "db": "quantroute.cli.db:db",
    "eval": "quantroute.cli.eval:eval_group",
    "sim": "quantroute.cli.sim:sim",
    "capacity": "quantroute.cli.capacity:capacity",
    "router": "quantroute.cli.router:router",
    "node": "quantroute.cli.node:node",
    "rollout": "quantroute.cli.rollout:rollout",
    "controller": "quantroute.cli.controller:controller",
    "loadtest": "quantroute.cli.loadtest:loadtest",
    "user": "quantroute.cli.user:user",
    "key": "quantroute.cli.key:key",
    "tenant": "quantroute.cli.tenant:tenant",
    "quantize": "quantroute.cli.quantize:quantize",
    "fleet": "quantroute.cli.fleet:fleet",
    "dashboard": "quantroute.cli.dashboard:dashboard",
    "shadow": "quantroute.cli.shadow:shadow",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)


@click.group(cls=LazyGroup)
@click.version_option(package_name="quantroute")
def cli() -> None:
    """quantroute: route each request to the cheapest precision tier its policy allows."""


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
