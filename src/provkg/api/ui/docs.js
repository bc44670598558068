// Swagger UI on /docs, started from a file so the page's CSP can forbid inline scripts.
window.SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
