from django.apps import AppConfig


class McpGatewayConfig(AppConfig):
    name = "mcp_gateway"
    verbose_name = "MCP gateway"

    # What each role may do on this app's models (composed by tenancy.roles).
    role_permissions = {
        "auditor": {"mcp_gateway.gateway": ("view",), "mcp_gateway.gatewaycall": ("view",)},
        "operator": {"mcp_gateway.gateway": ("view", "add", "change")},  # never deleted: switched off
    }

    def ready(self) -> None:
        # Imported here, once the app registry is ready: these modules load models.
        from agents.demo import demo_seeded
        from agents.engine.runner import register_engine
        from agents.models import ExecutionPath
        from mcp_gateway.demo import demo_gateway_seed
        from mcp_gateway.engine import engine_for_gateway_run

        register_engine(ExecutionPath.MCP, engine_for_gateway_run)
        demo_seeded.connect(demo_gateway_seed, dispatch_uid="mcp_gateway.demo_gateway_seed")
