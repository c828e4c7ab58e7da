// Starts Swagger UI on /docs (web/api_docs.py) over the OpenAPI document its <script> tag names.
// A file rather than an inline script, so the page's Content-Security-Policy can allow scripts
// from the store alone.
"use strict";
(() => {
  window.ui = SwaggerUIBundle({
    url: document.currentScript.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    // Swagger UI's default sends the document to validator.swagger.io: nothing leaves the store.
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
  });
})();
