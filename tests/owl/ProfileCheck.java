// OWL 2 DL profile check with OWLAPI (the 3.4.3 jar owlready2 bundles), for tests/test_ontology_profile.py.
//
//   java -cp OWLAPI_JAR ProfileCheck.java MAPPINGS_FILE ONTOLOGY_FILE...
//
// MAPPINGS_FILE: one "ONTOLOGY_IRI<TAB>LOCAL_FILE" a line; every owl:imports is answered from it
// (a trailing '#' or '/' of the IRI ignored), and an import it does not name fails the load, so
// nothing is ever fetched from the web. Output, one violation a line (tabs inside a field
// replaced by spaces, newlines by " "):
//   VIOLATION<TAB>FILE<TAB>VIOLATING_ONTOLOGY_IRI<TAB>VIOLATION_CLASS<TAB>DESCRIPTION
// then "DONE<TAB>FILE<TAB>COUNT" per file. Exit status 0 when every file loaded (violations or
// not), 2 on a usage or load error (message on stderr).

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.Map;

import org.semanticweb.owlapi.apibinding.OWLManager;
import org.semanticweb.owlapi.model.IRI;
import org.semanticweb.owlapi.model.OWLAxiom;
import org.semanticweb.owlapi.model.OWLOntology;
import org.semanticweb.owlapi.model.OWLOntologyID;
import org.semanticweb.owlapi.model.OWLOntologyIRIMapper;
import org.semanticweb.owlapi.model.OWLOntologyManager;
import org.semanticweb.owlapi.profiles.OWL2DLProfile;
import org.semanticweb.owlapi.profiles.OWLProfileReport;
import org.semanticweb.owlapi.profiles.OWLProfileViolation;

public class ProfileCheck {

    private static String key(String iri) {
        return iri.replaceAll("[#/]+$", "");
    }

    private static String field(Object value) {
        return String.valueOf(value).replace('\t', ' ').replace("\r", "").replace('\n', ' ');
    }

    /** The ontology of the imports closure that holds the violating axiom (else the one reported). */
    private static OWLOntologyID owner(OWLOntology root, OWLProfileViolation violation) {
        OWLAxiom axiom = violation.getAxiom();
        if (axiom != null) {
            for (OWLOntology candidate : root.getImportsClosure()) {
                if (candidate.containsAxiom(axiom)) {
                    return candidate.getOntologyID();
                }
            }
        }
        return violation.getOntologyID();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: ProfileCheck MAPPINGS_FILE ONTOLOGY_FILE...");
            System.exit(2);
        }
        final Map<String, IRI> local = new HashMap<>();
        for (String line : Files.readAllLines(new File(args[0]).toPath(), StandardCharsets.UTF_8)) {
            String[] parts = line.split("\t");
            if (parts.length == 2) {
                local.put(key(parts[0]), IRI.create(new File(parts[1]).getAbsoluteFile()));
            }
        }
        // an unmapped import resolves to a file that cannot exist: the load fails, offline
        final IRI nowhere = IRI.create(new File("/nonexistent/provkg-unmapped-import.ttl"));
        OWLOntologyIRIMapper mapper = iri -> local.getOrDefault(key(iri.toString()), nowhere);
        for (int i = 1; i < args.length; i++) {
            File file = new File(args[i]);
            // a fresh manager per file: each ontology is checked with its own imports closure only
            OWLOntologyManager manager = OWLManager.createOWLOntologyManager();
            manager.addIRIMapper(mapper);
            OWLOntology ontology;
            try {
                ontology = manager.loadOntologyFromOntologyDocument(file);
            } catch (Exception exc) {
                System.err.println("cannot load " + file + ": " + field(exc));
                System.exit(2);
                return;
            }
            OWLProfileReport report = new OWL2DLProfile().checkOntology(ontology);
            int count = 0;
            for (OWLProfileViolation violation : report.getViolations()) {
                String whereIri = String.valueOf(owner(ontology, violation).getOntologyIRI());
                System.out.println("VIOLATION\t" + field(file) + "\t" + field(whereIri) + "\t"
                        + violation.getClass().getSimpleName() + "\t" + field(violation));
                count++;
            }
            System.out.println("DONE\t" + field(file) + "\t" + count);
        }
    }
}
